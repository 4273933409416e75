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

// ErrNotApplied is wrapped, besides [ErrStoreUnavailable], into a store
// failure that certainly changed nothing: the call never reached the store
// (no connection could be made) or the store refused it whole. Any other
// failure of a Reserve may have been applied after all (a timeout can
// strike after the store acted), and the Limiter releases it.
var ErrNotApplied = errors.New("accounting: not applied")

// ErrNoReservation is returned by [Store.Settle] when the store holds no
// record of the reservation: it was settled already (a retry after an
// ambiguous failure finds this), its record outlived [RecordTTL], or the
// store lost it (a Redis restart without persistence). Nothing changed:
// the estimate stays charged as it was.
var ErrNoReservation = errors.New("accounting: no record of the reservation")

// ErrReleased is returned by [Store.Reserve] when [Store.Release] for the
// same ID reached the store first: nothing was charged. Only a Reserve
// whose caller has already given up on it (it timed out) can meet it.
var ErrReleased = errors.New("accounting: reservation released before it arrived")

// Store keeps counters and decides reservations atomically.
//
// Implementations must run the algorithms exactly as the memstore package
// does (the storetest suite pins it) and take time from their own clock,
// so that replicas sharing a store agree on windows whatever their clocks
// say.
//
// An admitted reservation leaves a record of itself in the store, keyed by
// its ID, until it is settled or released or [RecordTTL] passes. The
// record is what makes a settlement happen at most once and what lets a
// reservation whose answer was lost be found and undone; it costs memory
// only while the request is in flight.
//
// # Bounding a call
//
// A Store bounds each of its calls itself, from the call to the answer,
// and whatever the context says: it is the one that knows what a call
// costs on its network (redisstore: its Options.Timeout, dials and pool
// waits included; memstore answers at once). The Limiter sets no timeout
// of its own. It passes Reserve the caller's context, so that a caller
// who goes away stops waiting, and Settle and Release a context that is
// never cancelled (the caller's, through context.WithoutCancel, or
// context.Background for a retry), since a settlement must land exactly
// when the client has gone: the store's own bound is then what ends the
// call, and a Store without one would hold a settling request forever.
//
// A call that failed because the store could not be reached, or did not
// answer in time, returns an error wrapping [ErrStoreUnavailable] (and
// [ErrNotApplied] when it certainly changed nothing); any other error
// means the call was refused before it reached the store.
type Store interface {
	// Reserve checks every item and, only if all of them fit, charges all
	// of them and records the reservation, atomically with respect to
	// every other call on the same counters. A request that does not fit
	// charges nothing and leaves no record. The result holds one state
	// per item, in order, either way. It returns ErrReleased, charging
	// nothing, if Release for req.ID came first.
	//
	// An Optional item never keeps the others from being charged: the
	// request is admitted when every other item fits, and an optional
	// item is then charged only if it fits itself (its state's Fits says
	// whether it was). The record remembers which optional items were
	// not charged, so that Release refunds none of them (nor returns a
	// lease that one of them did not take).
	Reserve(ctx context.Context, req ReserveRequest) (ReserveResult, error)
	// Settle replaces each item's reserved amount with its actual amount
	// and deletes the reservation's record, in one atomic step, if the
	// record is there. If not, it changes nothing and returns
	// ErrNoReservation: settling again is a no-op, so a retry after an
	// ambiguous failure never double-books. Its items are those the
	// reservation charged: an optional item Reserve did not charge is
	// left out, as the Limiter leaves it out. An item whose Epoch is not
	// its counter's (the counter was reset since the reservation; see
	// [Inspector.ResetCounter]) changes nothing on it.
	Settle(ctx context.Context, req SettleRequest) error
	// Release undoes a reservation whose Reserve failed without a clear
	// answer, req being what that Reserve was asked. If the reservation
	// was recorded, every item's amount is refunded where it was booked
	// (as a settlement to zero would) and the record deleted: released
	// is true. If not, Release leaves a tombstone for [RecordTTL] so that
	// the Reserve, should it arrive later, charges nothing. Releasing
	// again is a no-op. A counter reset since the reservation was made
	// gets nothing back.
	Release(ctx context.Context, req ReserveRequest) (released bool, err error)
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
	// Location is the time zone of a calendar window; nil means UTC.
	Location *time.Location
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
	// Optional items (a shadow limit's) are charged when they fit and
	// never veto the reservation; see [Store.Reserve].
	Optional bool
}

// ReserveRequest is one atomic, all-or-nothing reservation. Its items
// name distinct counters (the Limiter's limit names are unique): each item
// is checked against its counter's state before any of them is charged.
type ReserveRequest struct {
	// ID identifies the reservation at settlement and release; it must
	// be unique (a second reservation with the same ID replaces the
	// first's record).
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
	// Expired reports a [Lifetime] counter whose wall-clock cap has
	// passed: nothing fits any more.
	Expired bool
	// Mark records which window or slot was charged; pass it back in
	// [SettleItem.Mark].
	Mark int64
	// InFlight is the part of the counter's usage that reservations
	// still in flight hold: admitted, neither settled nor released, and
	// with a record that still counts ([RecordExpiry]). It is as of the
	// same moment as Remaining (after this reservation's own charge when
	// it was admitted, before it when not) and at most the usage,
	// Capacity - Remaining (never below zero). Per algorithm, what the
	// reservations hold:
	//
	//   - fixed window (calendar ones included): those made in the
	//     current window;
	//   - sliding window: those whose slot still counts;
	//   - lifetime: those charged to the current run;
	//   - token bucket: all of them, but at most what the bucket lacks
	//     of full (a refund never fills it beyond its capacity);
	//   - leases: every lease (each is a reservation in flight).
	//
	// Settling and releasing them can free at most this much: a
	// settlement gives back what its reservation's estimate exceeded the
	// usage, which may be nothing. A reservation made before the
	// counter was reset ([Inspector.ResetCounter]) holds nothing on it.
	InFlight int64
	// Epoch identifies the counter's state since it was last reset (0:
	// never, as far as the store remembers); pass it back in
	// [SettleItem.Epoch], so that a settlement of a reservation made
	// before a reset changes nothing on the fresh counter.
	Epoch int64
}

// SettleItem corrects one counter's charge.
type SettleItem struct {
	Counter
	Reserved int64
	Actual   int64
	// Mark is [CounterState.Mark] from the reservation.
	Mark int64
	// Epoch is [CounterState.Epoch] from the reservation.
	Epoch int64
}

// SettleRequest settles one reservation.
type SettleRequest struct {
	ID    string
	Items []SettleItem
}

// RecordTTL is how long a store keeps a reservation's record (or a
// release's tombstone) when nothing deletes it: a settlement must come
// within it, so it covers the longest request tokenwarden expects plus
// the longest settlement retry ([MaxSettleRetry]). A settlement that
// comes later finds no record and changes nothing (ErrNoReservation; the
// Limiter logs and counts it): the reservation's estimate stays charged,
// which overcharges by what the estimate exceeded the usage (the usual
// case, as the estimate includes the output cap) and undercharges by what
// the usage exceeded it. Records are deleted at settlement, so the TTL
// costs memory only for requests whose replica died before settling.
//
// A record written at time t counts until [RecordExpiry](t): RecordTTL
// after the end of t's [RecordGrain], so between RecordTTL and
// RecordTTL+RecordGrain. The rounding lets a store keep what
// reservations hold in flight ([CounterState.InFlight]) in a few sums
// per counter, one per grain, each of which stops counting exactly when
// the records of its reservations do.
const RecordTTL = time.Hour

// RecordGrain is the step in which records expire (see [RecordTTL]).
const RecordGrain = RecordTTL / SlidingSlots

// ResetKept is how long a store remembers that a counter was reset
// ([CounterState.Epoch]): as long as a reservation made before the reset
// can still be settled or released, a hold's ([HoldTTL]) included.
const ResetKept = HoldTTL

// RecordExpiry returns when (µs) a reservation's record or a release's
// tombstone written at t (µs) stops counting.
func RecordExpiry(t int64) int64 {
	g := RecordGrain.Microseconds()
	return (floorDiv(t, g)+1)*g + RecordTTL.Microseconds()
}

// HoldExpiry returns when (µs) a hold made at now (µs) for ttl stops
// counting ([Holder]): ttl later, rounded down to a [RecordGrain] so that
// its record, whose expiry is so rounded, counts exactly as long; at the
// end of now's grain at the soonest.
func HoldExpiry(now int64, ttl time.Duration) int64 {
	g := RecordGrain.Microseconds()
	return max(floorDiv(now+ttl.Microseconds(), g), floorDiv(now, g)+1) * g
}

// RecordDated returns the time a record must carry to count until
// expiry (µs), the end of a [RecordGrain]: the inverse of [RecordExpiry]
// there. A hold's record is so dated ahead.
func RecordDated(expiry int64) int64 {
	return expiry - RecordGrain.Microseconds() - RecordTTL.Microseconds()
}

// InFlightPiece returns the piece of counter c that a reservation made at
// t (µs) holds its amount in while in flight: the start (µs) of t's
// [RecordGrain], or for a sliding window of t's slot if that is later.
// Each piece stops counting all at once ([InFlightFrom]): when its
// reservations' records expire, and for a sliding window also when its
// slot leaves the window.
func InFlightPiece(c *Counter, t int64) int64 {
	g := RecordGrain.Microseconds()
	p := floorDiv(t, g) * g
	if c.Algorithm == SlidingWindow {
		s := SlotLength(c)
		p = max(p, floorDiv(t, s)*s)
	}
	return p
}

// InFlightFrom returns the first piece (µs) of counter c that still
// counts at now (µs): every piece from it on does, every earlier one does
// not.
func InFlightFrom(c *Counter, now int64) int64 {
	g := RecordGrain.Microseconds()
	from := (floorDiv(now, g) - SlidingSlots) * g
	if c.Algorithm == SlidingWindow {
		s := SlotLength(c)
		from = max(from, (floorDiv(now, s)-SlidingSlots)*s)
	}
	return from
}

// floorDiv is a/b rounded down, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// MaxSettleRetry is the longest [Options.SettleRetry] allowed.
const MaxSettleRetry = 5 * time.Minute
