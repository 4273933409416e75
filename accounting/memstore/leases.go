package memstore

import "github.com/tokenwarden/tokenwarden/accounting"

// A concurrent limit's counter holds leases: reservation ID → expiry
// (µs). A lease counts while its expiry is after now; an expired one is
// dropped the next time the counter is looked at, as Redis trims its
// sorted set. The counter itself expires with its last lease.

// liveLeases drops the expired leases and returns how many remain.
// oldest is a lower bound of the earliest expiry, so that the map is
// only walked when a lease may actually have expired.
func (ct *counter) liveLeases(now int64) int64 {
	if ct.oldest <= now && len(ct.leases) > 0 {
		ct.oldest = 0
		for id, exp := range ct.leases {
			switch {
			case exp <= now:
				delete(ct.leases, id)
			case ct.oldest == 0 || exp < ct.oldest:
				ct.oldest = exp
			}
		}
	}
	return int64(len(ct.leases))
}

// checkLeases is check for a counter of leases. A refused request may
// retry after accounting.ConcurrentRetryAfter: when a lease comes back
// is not known.
func (ct *counter) checkLeases(c *accounting.Counter, amount, now int64) accounting.CounterState {
	held := ct.liveLeases(now)
	st := accounting.CounterState{Remaining: c.Limit - held}
	switch {
	case amount > c.Limit:
		st.NeverFits = true
	case held+amount <= c.Limit:
		st.Fits = true
	default:
		st.RetryAfter = accounting.ConcurrentRetryAfter
	}
	return st
}

// takeLease records reservation id's lease (an amount of 0 takes none),
// and updates st to describe the counter afterwards.
func (ct *counter) takeLease(c *accounting.Counter, id string, amount, now int64, st *accounting.CounterState) {
	if amount <= 0 {
		return
	}
	if ct.leases == nil {
		ct.leases = make(map[string]int64)
	}
	exp := now + c.Window.Microseconds()
	if _, ok := ct.leases[id]; !ok {
		st.Remaining -= amount
		st.InFlight += amount
	}
	ct.leases[id] = exp
	if ct.oldest == 0 || exp < ct.oldest {
		ct.oldest = exp
	}
	ct.expires = max(ct.expires, exp)
}

// returnLeaseLocked returns reservation id's lease on the counter key,
// dropping the counter once it holds none (as Redis drops an empty
// sorted set).
func (s *Store) returnLeaseLocked(key, id string) {
	ct, ok := s.counters[key]
	if !ok {
		return
	}
	delete(ct.leases, id)
	if len(ct.leases) == 0 {
		s.dropCounterLocked(ct)
	}
}
