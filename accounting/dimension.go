package accounting

import (
	"fmt"
	"strconv"
)

// Dimension is what a limit counts.
type Dimension uint8

// The dimensions a limit can count. Their order is the order of
// [DimensionStates].
const (
	// Requests counts one per admitted request.
	Requests Dimension = iota
	// Tokens counts input plus output tokens.
	Tokens
	// Cost counts micro-dollars priced from the model's price table.
	Cost
	// Concurrent counts requests in flight: one lease per admitted
	// request, returned at its settlement (see [Leases]).
	Concurrent

	numDimensions
)

// String returns the dimension's name as used in config and reply headers.
func (d Dimension) String() string {
	switch d {
	case Requests:
		return "requests"
	case Tokens:
		return "tokens"
	case Cost:
		return "cost"
	case Concurrent:
		return "concurrent"
	}
	return "dimension(" + strconv.Itoa(int(d)) + ")"
}

// ParseDimension parses a dimension name from config.
func ParseDimension(s string) (Dimension, error) {
	switch s {
	case "requests":
		return Requests, nil
	case "tokens":
		return Tokens, nil
	case "cost":
		return Cost, nil
	case "concurrent":
		return Concurrent, nil
	}
	return 0, fmt.Errorf("unknown dimension %q (want requests, tokens, cost or concurrent)", s)
}

// Algorithm is how a counter forgets past usage.
type Algorithm uint8

// The algorithms a limit can use. Every Store implements all three with the
// same arithmetic, so a limit behaves the same on any store.
const (
	// SlidingWindow counts usage booked in the last Window, in
	// [SlidingSlots] slots. A charge counts from the moment it is booked
	// until between Window and Window+Window/SlidingSlots later, so no
	// interval of length Window ever holds more than the limit: there is
	// no double burst at a window edge.
	SlidingWindow Algorithm = iota
	// FixedWindow counts usage per window aligned to the Unix epoch (UTC),
	// or per calendar month. The whole budget returns at the window's end.
	FixedWindow
	// TokenBucket refills Limit per Window continuously, up to Burst.
	TokenBucket
	// Leases counts the live leases of a [Concurrent] limit: one per
	// admitted reservation whose item amount is 1 (0 takes none), held
	// under the reservation's ID until its Settle or Release returns it
	// (whatever the settled amounts) or Window (the lease) passes on the
	// store's clock. It is not named in config: a concurrent limit
	// always uses it.
	Leases
	// Lifetime counts usage from the scope's first request on and never
	// forgets it: a budget for the life of the scope (an agent's run),
	// not a rate. Window caps the scope's life: from its first request
	// on, after Window nothing more is admitted (see lifetime.go).
	Lifetime
)

// SlidingSlots is how many slots a sliding window is divided into: the
// granularity with which usage leaves the window.
const SlidingSlots = 10

// String returns the algorithm's config name.
func (a Algorithm) String() string {
	switch a {
	case SlidingWindow:
		return "sliding_window"
	case FixedWindow:
		return "fixed_window"
	case TokenBucket:
		return "token_bucket"
	case Leases:
		return "leases"
	case Lifetime:
		return "lifetime"
	}
	return "algorithm(" + strconv.Itoa(int(a)) + ")"
}

// ParseAlgorithm parses an algorithm name from config.
func ParseAlgorithm(s string) (Algorithm, error) {
	switch s {
	case "sliding_window":
		return SlidingWindow, nil
	case "fixed_window":
		return FixedWindow, nil
	case "token_bucket":
		return TokenBucket, nil
	case "lifetime":
		return Lifetime, nil
	}
	return 0, fmt.Errorf("unknown algorithm %q (want sliding_window, fixed_window, token_bucket or lifetime)", s)
}

// Calendar says whether a fixed window follows the calendar rather than a
// fixed length.
type Calendar uint8

const (
	// NoCalendar windows have a fixed length, aligned to the Unix epoch.
	// A "day" window is this with a length of 24h: UTC days.
	NoCalendar Calendar = iota
	// CalendarMonth windows are UTC calendar months, or those of the
	// limit's Location.
	CalendarMonth
	// CalendarDay windows are the calendar days of the limit's Location
	// (midnight to midnight, 23 or 25 hours on a daylight-saving change).
	CalendarDay
)

// FailMode says what a limit does when the store cannot be reached.
type FailMode uint8

const (
	// FailClosed rejects the request with 503: a dead store must not mean
	// unlimited spend.
	FailClosed FailMode = iota
	// FailOpen admits the request without reserving.
	FailOpen
)

// String returns the config name of the fail mode.
func (f FailMode) String() string {
	if f == FailOpen {
		return "allow"
	}
	return "deny"
}
