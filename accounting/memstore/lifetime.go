package memstore

import "github.com/tokenwarden/tokenwarden/accounting"

// A lifetime counter holds the run's start (µs; zero until its first
// charge) in window and what it has used in used, as a fixed window
// does its index and usage. The start is the mark of its charges.

// checkLifetime is check for a lifetime counter. It changes nothing: a
// run starts with its first admitted request, not with a refused one.
func (ct *counter) checkLifetime(c *accounting.Counter, amount, now int64) accounting.CounterState {
	start := ct.window
	if start == 0 {
		start = now
	}
	end, _ := accounting.LifetimeEnd(c, start)
	st := accounting.CounterState{
		Remaining: c.Limit - ct.used,
		Reset:     accounting.Micros(end - now),
		Mark:      start,
	}
	switch {
	case now >= end:
		st.Expired = true
	case amount > c.Limit:
		st.NeverFits = true
	case ct.used+amount <= c.Limit:
		st.Fits = true
	}
	// A refusal is final: RetryAfter stays zero.
	return st
}

// commitLifetime charges amount (already checked), starting the run if
// this is its first charge.
func (ct *counter) commitLifetime(c *accounting.Counter, amount int64, st *accounting.CounterState) {
	if ct.window == 0 {
		ct.window, ct.pieces = st.Mark, ct.pieces[:0]
		_, ct.expires = accounting.LifetimeEnd(c, st.Mark)
	}
	ct.used += amount
	st.Remaining -= amount
}

// settleLifetime corrects a charge of the run that started at mark; a
// settlement that finds another run (or none) changes nothing.
func (ct *counter) settleLifetime(delta, mark int64) {
	if delta == 0 || ct.window == 0 || ct.window != mark {
		return
	}
	ct.used = max(0, ct.used+delta)
}
