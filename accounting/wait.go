package accounting

import (
	"context"
	"math"
	"time"
)

// A limit with [OnExhausted.WaitUpTo] (config: on_exhausted: {wait_up_to: 2s})
// turns a short refusal into a short wait: a request it refuses, when
// capacity returns within the wait, is held and admitted when it does,
// rather than answered 429 and retried by the client. It is for limits
// whose refusals are brief by nature (requests per second, a token
// bucket that refills quickly), where a held request costs the client
// less than a refusal, a back-off and a retry.
//
// A request is held only when every limit that refused it waits, none
// of them is one it can never fit, and the last of them to free does so
// within the shortest of their waits, which is how long it may wait;
// otherwise it is refused at once, as without waits.
//
// Waiting requests queue per counter: one limit's counter for one scope
// (the [Trip.Key] of the limit that frees last), first come, first
// served. Only the head of a queue asks the store again, at the time the
// store named (Trip.RetryAfter); when it is admitted the next one asks
// at once, so that a window that frees many admits many. The store
// decides every attempt, as it decides every first one: the queue keeps
// no model of capacity, and a request that finds capacity on its first
// attempt is admitted at once, whether or not others wait (the queue
// orders the requests that must wait; it holds back none that need not).
//
// The queues are bounded, per key and in all ([Options.MaxWaiting],
// [Options.MaxWaitingPerKey]): a request over a bound is refused at once.
// A request whose caller goes away (its context ends) leaves its queue
// at once and reserves nothing. A store that fails while a request waits
// is the limit's [FailMode], as on a first attempt: the request is
// admitted unreserved under fail-open limits, and the error is returned
// under a fail-closed one.

// MaxWaitUpTo is the longest [OnExhausted.WaitUpTo]. A request held in Envoy
// keeps its ext_proc message unanswered, and Envoy allows that only up
// to the filter's max_message_timeout: the wait, plus [WaitMargin], must
// fit in it. Ten seconds is also about as long as a caller of an
// interactive API tolerates before a refusal would have served it
// better.
const MaxWaitUpTo = 10 * time.Second

// WaitMargin is what a held request needs beyond its wait: the last
// attempt's store call and the reply. A caller that holds a request in a
// proxy with a per-message timeout extends it by the wait plus this.
const WaitMargin = time.Second

// Defaults of [Options.MaxWaiting] and [Options.MaxWaitingPerKey]. A
// waiting request costs a goroutine and its request's memory; the
// bounds keep a flood from turning into unbounded memory, and one scope
// from taking every place.
const (
	DefaultMaxWaiting       = 1000
	DefaultMaxWaitingPerKey = 100
)

// WaitOutcome is how a request that was to wait for capacity fared. Its
// string is the outcome label of tokenwarden_waited_total.
type WaitOutcome string

// The outcomes of a wait.
const (
	// WaitAdmitted: capacity returned within the wait; admitted.
	WaitAdmitted WaitOutcome = "admitted"
	// WaitTimedOut: refused after waiting: capacity would not return
	// within the wait, or an attempt was refused by a limit that does
	// not wait.
	WaitTimedOut WaitOutcome = "timed_out"
	// WaitCancelled: the caller went away while the request waited.
	WaitCancelled WaitOutcome = "cancelled"
	// WaitQueueFull: refused at once: the queue was at its bound.
	WaitQueueFull WaitOutcome = "queue_full"
	// WaitUnavailable: the store failed under a fail-closed limit while
	// the request waited (it has no Decision: ReserveWaiting returns the
	// error).
	WaitUnavailable WaitOutcome = "unavailable"
)

// Wait reports how a request held for capacity fared.
type Wait struct {
	// Outcome is empty for a request that did not wait.
	Outcome WaitOutcome
	// Took is how long it was held.
	Took time.Duration
}

// validateWait checks WaitUpTo: within 0..MaxWaitUpTo, and only on a
// limit whose refusals pass.
func (l *Limit) validateWait() []error {
	switch {
	case l.OnExhausted.WaitUpTo == 0:
		return nil
	case l.OnExhausted.WaitUpTo < 0:
		return []error{FieldErrorf("on_exhausted.wait_up_to", "must not be negative")}
	case l.OnExhausted.WaitUpTo > MaxWaitUpTo:
		return []error{FieldErrorf("on_exhausted.wait_up_to", "%s is above the longest wait, %s (Envoy's max_message_timeout must cover the wait plus %s)", l.OnExhausted.WaitUpTo, MaxWaitUpTo, WaitMargin)}
	case l.Mode == Shadow:
		return []error{FieldErrorf("on_exhausted.wait_up_to", "a shadow limit refuses nothing, so nothing waits for it")}
	case l.Algorithm == Lifetime:
		return []error{FieldErrorf("on_exhausted.wait_up_to", "a lifetime budget never frees: waiting cannot help")}
	case l.Dimension == Concurrent || l.Algorithm == Leases:
		// When a lease comes back is not known (ConcurrentRetryAfter is
		// a guess), so a waiter could only poll.
		return []error{FieldErrorf("on_exhausted.wait_up_to", "a concurrent limit cannot say when a slot frees, so a request cannot wait for one")}
	}
	return nil
}

// waitFor returns how long a request refused with these states may wait:
// the shortest WaitUpTo of the limits that refused it, or zero when one
// of them does not wait or never frees, or when the last of them frees
// later than that.
func waitFor(items []reservedItem, states []CounterState) time.Duration {
	wait, last := time.Duration(math.MaxInt64), time.Duration(0)
	for i, st := range states {
		if st.Fits || items[i].limit.Mode == Shadow {
			// A shadow limit refuses nothing (see pickTrip).
			continue
		}
		lim := items[i].limit
		t := tripOf(&items[i], st)
		if lim.OnExhausted.WaitUpTo <= 0 || t.never() || lim.Algorithm == Lifetime {
			return 0
		}
		wait, last = min(wait, lim.OnExhausted.WaitUpTo), max(last, t.nextAttempt())
	}
	if wait == math.MaxInt64 || last > wait {
		return 0
	}
	return wait
}

// ReserveWaiting is [Limiter.Reserve], except that a request refused by
// limits that let it wait (see [OnExhausted.WaitUpTo]) is held until capacity
// returns, its context ends, or its wait is over. hold is called once,
// before the request is held, with the longest it may be held; a caller
// that must keep something alive meanwhile (extproc extends Envoy's
// message timeout) does it there, and an error from hold ends the wait as
// a cancellation.
//
// The result is Reserve's: an admission (Decision.Wait.Outcome
// WaitAdmitted when it waited), a refusal (the last attempt's, its
// Retry-After counted from now; WaitTimedOut or WaitQueueFull when it
// was to wait), or an error. A caller that went away gets a refusal with
// WaitCancelled, which reserved nothing: there is no one to answer. (Its
// context may end while the store admits it: that admission is returned,
// and settles as any admission whose client left.)
func (l *Limiter) ReserveWaiting(ctx context.Context, req Request, hold func(upTo time.Duration) error) (*Reservation, error) {
	r, err := l.reserveWaiting(ctx, req, hold)
	if err == nil && !r.Admitted && r.Wait.Outcome != WaitCancelled {
		l.countRefusal(r)
	}
	return r, err
}

// reserveWaiting is ReserveWaiting without counting a refusal: a refusal
// that a downgrade then turns into an admission is no rejection (see
// [Limiter.ReserveWaitingOrDowngrade]).
func (l *Limiter) reserveWaiting(ctx context.Context, req Request, hold func(upTo time.Duration) error) (*Reservation, error) {
	start := time.Now()
	r, err := l.reserve(ctx, req)
	if err != nil || r.Admitted {
		return r, err
	}
	if r.Trip.Wait <= 0 {
		return l.refused(r, start, start, ""), nil
	}
	key := r.Trip.Key
	w := l.waits.join(key)
	if w == nil {
		return l.waited(r, start, start, WaitQueueFull), nil
	}
	defer l.waits.leave(key, w)
	l.m.waiting.Inc()
	defer l.m.waiting.Dec()
	if err := hold(r.Trip.Wait); err != nil {
		return l.waited(r, start, start, WaitCancelled), nil
	}
	return l.wait(ctx, req, r, w, start, start.Add(r.Trip.Wait))
}

// wait holds r, a request refused at start, first until it heads its
// queue (w), then until the retry time the store named, and asks the
// store again, until it is admitted or deadline would pass.
func (l *Limiter) wait(ctx context.Context, req Request, r *Reservation, w *waiter, start, deadline time.Time) (*Reservation, error) {
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	select {
	case <-w.turn:
	case <-ctx.Done():
		return l.waited(r, start, start, WaitCancelled), nil
	case <-timeout.C:
		return l.waited(r, start, start, WaitTimedOut), nil
	}
	refusedAt := start
	for {
		retryAt := refusedAt.Add(r.Trip.nextAttempt())
		if retryAt.After(deadline) {
			// Giving up now spares the client a wait that ends in the
			// same refusal.
			return l.waited(r, refusedAt, start, WaitTimedOut), nil
		}
		if d := time.Until(retryAt); d > 0 {
			timer := time.NewTimer(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return l.waited(r, refusedAt, start, WaitCancelled), nil
			}
		}
		at := time.Now()
		next, err := l.reserve(ctx, req)
		switch {
		case err != nil && ctx.Err() != nil:
			return l.waited(r, refusedAt, start, WaitCancelled), nil
		case err != nil:
			l.count(WaitUnavailable, start)
			return nil, err
		case next.Admitted:
			next.Wait = Wait{Outcome: WaitAdmitted, Took: time.Since(start)}
			l.count(WaitAdmitted, start)
			return next, nil
		case next.Trip.Wait <= 0:
			// Refused by a limit that does not wait, or for longer
			// than it allows.
			return l.waited(next, at, start, WaitTimedOut), nil
		}
		r, refusedAt = next, at
	}
}

// count counts a wait that began at start and ended with o.
func (l *Limiter) count(o WaitOutcome, start time.Time) {
	l.m.waited.WithLabelValues(string(o)).Inc()
	if o != WaitQueueFull {
		l.m.waitSeconds.Observe(time.Since(start).Seconds())
	}
}

// waited ends the wait, begun at start, of a request that was not
// admitted: r is its last refusal, made at refusedAt.
func (l *Limiter) waited(r *Reservation, refusedAt, start time.Time, o WaitOutcome) *Reservation {
	l.count(o, start)
	return l.refused(r, refusedAt, start, o)
}

// refused returns r, a refusal made at refusedAt, as of now: its
// Retry-After and resets count from now, and o (empty: it did not wait)
// is its wait's outcome, begun at start. It does not count the refusal:
// the caller does, once it knows the refusal reaches the client (a
// cancelled one does not, nor one a downgrade admits).
func (l *Limiter) refused(r *Reservation, refusedAt, start time.Time, o WaitOutcome) *Reservation {
	now := time.Now()
	if o != "" {
		r.Wait = Wait{Outcome: o, Took: now.Sub(start)}
	}
	since := now.Sub(refusedAt)
	r.Trip.RetryAfter = max(r.Trip.RetryAfter-since, 0)
	r.Trip.FreesAfter = max(r.Trip.FreesAfter-since, 0)
	r.Trip.Reset = max(r.Trip.Reset-since, 0)
	if d := &r.Dims[r.Trip.Limit.Dimension]; d.Applied {
		d.Reset = max(d.Reset-since, 0)
	}
	return r
}
