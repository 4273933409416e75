package accounting

import "time"

// A concurrent limit caps the requests a scope has in flight at once,
// rather than what it spends over a window. It uses the [Leases]
// algorithm: admission takes a lease on the scope's counter, in the same
// atomic step as every other limit's charge, and the reservation's
// settlement returns it (a concurrent item's actual amount is always 0).
// Every admitted request settles exactly once, whether it completes, its
// stream is cut, the client resets, the upstream fails or tokenwarden
// shuts down, so a lease is held exactly as long as its request.
//
// The one case settlement cannot cover is a replica that dies with
// requests in flight: their leases would be held for ever. So a lease
// expires on its own once the limit's lease duration (Limit.Window,
// config key lease) has passed on the store's clock, and a dead
// replica's leases are free again at most that long after it took them.
// The lease must therefore exceed the longest request: a stream that
// outlives its lease stops counting, letting one more request in while it
// runs. Leases are not renewed mid-stream, deliberately: a renewal would
// be a store round trip per long request while it streams, where the
// limiter otherwise makes exactly two (reserve and settle), and a lease
// longer than any request costs nothing while replicas are healthy (a
// settled lease is returned at once, however long it was).

// Bounds and defaults of a concurrent limit's lease.
const (
	// DefaultLease is the lease of a concurrent limit that names none:
	// longer than the ten-minute default timeout of the OpenAI and
	// Anthropic SDKs, so that no request an SDK still waits for outlives
	// its lease.
	DefaultLease = 15 * time.Minute
	// MinLease is the shortest lease: below a second the store's clock
	// and the network blur it.
	MinLease = time.Second
	// MaxLease is the longest lease. A settlement must find its
	// reservation's record to return the lease, and records last
	// [RecordTTL]: a lease that outlived its record could never be
	// returned early.
	MaxLease = RecordTTL
)

// ConcurrentRetryAfter is the Retry-After of a request refused by a
// concurrent limit. When a lease comes back depends on when a request in
// flight ends, which no one knows in advance (the lease's expiry is only
// a bound for crashed replicas): a second is long enough not to hammer
// the limiter and short enough to take a slot soon after it frees.
const ConcurrentRetryAfter = time.Second

// validateConcurrent checks a limit that uses leases: the concurrent
// dimension and the Leases algorithm go together, and the lease
// (Window) is within MinLease..MaxLease.
func (l *Limit) validateConcurrent() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, FieldErrorf(field, format, args...))
	}
	if l.Dimension != Concurrent {
		bad("algorithm", "leases counts only a concurrent limit")
	}
	if l.Algorithm != Leases {
		bad("algorithm", "a concurrent limit counts leases; it takes no algorithm")
	}
	if l.Limit <= 0 {
		bad("limit", "must be positive")
	}
	if l.Burst != 0 {
		bad("burst", "a concurrent limit has no burst")
	}
	if l.Calendar != NoCalendar || l.Window < MinLease || l.Window > MaxLease {
		bad("lease", "%s is outside %s..%s", l.Window, MinLease, MaxLease)
	}
	if l.OnStoreError > FailOpen {
		bad("on_store_error", "unknown fail mode %d", l.OnStoreError)
	}
	return errs
}
