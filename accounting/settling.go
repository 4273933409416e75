package accounting

import "time"

// A limit refuses a request on what its counter holds, and part of that
// may be held by reservations still in flight: estimates, the output cap
// included, that settle to the usage when their requests end, seconds
// or minutes later, giving back what they did not use. A refusal whose
// shortfall they hold ([Trip.Settling]) is not one that only the limit's
// reset can end: were they to use nothing, the request would fit now.
// It gets a short retry ([InFlightRetryAfter]) in place of the reset's
// (a daily budget's refusal would otherwise say "tomorrow" while the
// budget is held by one stream that settles for a tenth of it), and a
// request that may wait for its limit ([OnExhausted.WaitUpTo]) waits for
// it, asking the store again every [InFlightPoll].
//
// Whether the request does fit once they settle depends on what they
// use, which no one knows before: the retry may be refused again, with
// the hint what the counter then says. Only tokens and cost settle to
// the usage: a request counts 1 on a requests limit whatever it used,
// and a lease (a concurrent limit) is in flight by nature, with its own
// retry (ConcurrentRetryAfter).

// InFlightRetryAfter is the longest Retry-After of a refusal whose
// shortfall reservations in flight hold. A settlement can land at any
// moment, and a refusal costs the client no upstream call, so the retry
// is a poll; its interval weighs a client's wait past the settlement
// against its retries: the SDKs retry twice by default, so five seconds
// keeps a client asking for the ten seconds or so a chat completion in
// flight typically has left, and one whose request settles sooner waits
// at most five seconds past it.
const InFlightRetryAfter = 5 * time.Second

// InFlightPoll is how often a request that waits for reservations in
// flight to settle asks the store again: a settlement frees capacity the
// moment it lands, and only the head of each queue asks.
const InFlightPoll = 500 * time.Millisecond

// settling reports whether reservations in flight hold the shortfall of
// a request for amount that lim refused in state st: whether it would fit
// were they to settle using nothing.
func settling(lim *Limit, amount int64, st CounterState) bool {
	if st.NeverFits || st.Expired || st.InFlight <= 0 || (lim.Dimension != Tokens && lim.Dimension != Cost) {
		return false
	}
	return amount-st.Remaining <= st.InFlight
}

// nextAttempt is when a request held for capacity asks the store again
// after refusal t.
func (t *Trip) nextAttempt() time.Duration {
	if t.Settling {
		return min(t.RetryAfter, InFlightPoll)
	}
	return t.RetryAfter
}
