package accounting

import (
	"context"
	"errors"
	"time"
)

// ErrStoreUnavailable is returned (wrapped) when the store could not be
// reached or did not answer in time. Callers decide by each limit's
// [FailMode].
var ErrStoreUnavailable = errors.New("accounting: store unavailable")

// Store keeps counters and decides reservations atomically.
//
// Implementations must run the algorithms exactly as the memstore package
// does (the storetest suite pins it) and take time from their own clock,
// so that replicas sharing a store agree on windows whatever their clocks
// say.
type Store interface {
	// Reserve checks every item and, only if all of them fit, charges all
	// of them, atomically with respect to every other Reserve and Settle
	// on the same counters. A request that does not fit charges nothing.
	// The result holds one state per item, in order, either way.
	Reserve(ctx context.Context, req ReserveRequest) (ReserveResult, error)
	// Settle replaces each item's reserved amount with its actual amount.
	// It is idempotent per req.ID: settling the same reservation again is
	// a no-op, so a retry after an ambiguous failure never double-books.
	Settle(ctx context.Context, req SettleRequest) error
	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
}

// Counter is one limit's counter for one scope tuple, and how it counts.
type Counter struct {
	// Key is the store key, built by [CounterKey].
	Key       string
	Algorithm Algorithm
	Limit     int64
	Burst     int64
	Window    time.Duration
	Calendar  Calendar
}

// Capacity is the most the counter can hold.
func (c *Counter) Capacity() int64 {
	if c.Algorithm == TokenBucket && c.Burst > 0 {
		return c.Burst
	}
	return c.Limit
}

// ReserveItem asks a counter for an amount.
type ReserveItem struct {
	Counter
	Amount int64
}

// ReserveRequest is one atomic, all-or-nothing reservation. Its items
// name distinct counters (the Limiter's limit names are unique): each item
// is checked against its counter's state before any of them is charged.
type ReserveRequest struct {
	// ID identifies the reservation at settlement.
	ID    string
	Items []ReserveItem
}

// ReserveResult is a store's decision.
type ReserveResult struct {
	Admitted bool
	// States has one entry per requested item, in order.
	States []CounterState
}

// CounterState describes one counter as of a Reserve call.
type CounterState struct {
	// Remaining is what is left after this reservation when admitted, or
	// what was left before it when not. It may be negative after an extra
	// charge at settlement.
	Remaining int64
	// Reset is how long until the counter is back to full capacity.
	Reset time.Duration
	// Fits reports whether this item alone would have fitted.
	Fits bool
	// RetryAfter is, when the item did not fit, how long until enough
	// frees up for it; zero when it can never fit.
	RetryAfter time.Duration
	// NeverFits reports that the amount exceeds the counter's capacity.
	NeverFits bool
	// Mark records which window or slot was charged; pass it back in
	// [SettleItem.Mark].
	Mark int64
}

// SettleItem corrects one counter's charge.
type SettleItem struct {
	Counter
	Reserved int64
	Actual   int64
	// Mark is [CounterState.Mark] from the reservation.
	Mark int64
}

// SettleRequest settles one reservation.
type SettleRequest struct {
	ID    string
	Items []SettleItem
}

// SettledTTL is how long a store remembers a settled reservation ID, to
// make repeated settles no-ops. A repeat can only come from the Limiter's
// retries, so it must exceed the longest retry period
// ([Options.SettleRetry], at most [MaxSettleRetry]); keeping it short
// keeps the memory it costs (one small entry per request) in check.
const SettledTTL = 10 * time.Minute

// MaxSettleRetry is the longest [Options.SettleRetry] allowed.
const MaxSettleRetry = 5 * time.Minute
