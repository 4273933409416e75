package memstore

import (
	"context"
	"strings"

	"github.com/tokenwarden/tokenwarden/accounting"
)

var _ accounting.Inspector = (*Store)(nil)

// Peek implements [accounting.Inspector]: each counter as a reservation
// of nothing would see it, read from a copy so that nothing is created
// or changed.
func (s *Store) Peek(ctx context.Context, counters []accounting.Counter) ([]accounting.CounterUsage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]accounting.CounterUsage, len(counters))
	now := s.now().UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range counters {
		out[i] = s.peekLocked(&counters[i], counters[i].Key, now)
	}
	return out, nil
}

// peekLocked returns the state of the counter under key, counting as c
// does.
func (s *Store) peekLocked(c *accounting.Counter, key string, now int64) accounting.CounterUsage {
	var view counter
	if ct, ok := s.counters[key]; ok && ct.expires > now {
		view = *ct
	} else {
		view = *newCounter(c, now)
	}
	st := view.check(c, 0, now)
	return accounting.NewCounterUsage(c, st.Remaining, st.Reset)
}

// ResetCounter implements [accounting.Inspector]: the counter starts
// afresh, born just after now, and is kept (see accounting.ResetKept);
// a counter of leases is dropped, which returns every lease.
func (s *Store) ResetCounter(ctx context.Context, c accounting.Counter) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	now := s.now().UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	ct, ok := s.counters[c.Key]
	existed := s.peekLocked(&c, c.Key, now).Used > 0
	if c.Algorithm == accounting.Leases {
		// A lease settled or released after the reset returns nothing:
		// its member is gone with the others.
		if ok {
			s.dropCounterLocked(ct)
		}
		return existed, nil
	}
	born := max(now+1, s.bornLocked(c.Key, now)+1)
	ct = s.counterLocked(&c, now)
	ct.reset(&c, now)
	ct.expires, ct.born, ct.keep = 0, born, born+accounting.ResetKept.Microseconds()
	return existed, nil
}

// peekChunk is how many counters Top reads per hold of the lock.
const peekChunk = 1000

// Top implements [accounting.Inspector]. It walks the counters in the
// map's own (random) order under the store's lock, collecting the keys
// of the limit, then reads them peekChunk at a time, letting
// reservations in between: req.MaxScan bounds how long they wait.
func (s *Store) Top(ctx context.Context, req accounting.TopRequest) (accounting.TopResult, error) {
	if err := ctx.Err(); err != nil {
		return accounting.TopResult{}, err
	}
	now := s.now().UnixMicro()
	res := accounting.TopResult{Complete: true}
	var keys []string
	s.mu.Lock()
	seen := 0
	for key, ct := range s.counters {
		if seen == req.MaxScan {
			res.Complete = false
			break
		}
		seen++
		if strings.HasPrefix(key, req.Prefix) && ct.expires > now {
			keys = append(keys, key)
		}
	}
	s.mu.Unlock()
	res.Scanned = len(keys)
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), peekChunk)]
		keys = keys[len(chunk):]
		s.mu.Lock()
		for _, key := range chunk {
			c := req.Counter
			c.Key = key
			if u := s.peekLocked(&c, key, now); u.Used > 0 {
				res.Counters = append(res.Counters, accounting.TopCounter{Key: key, CounterUsage: u})
			}
		}
		s.mu.Unlock()
	}
	accounting.SortTop(res.Counters)
	if len(res.Counters) > req.N {
		res.Counters = res.Counters[:max(req.N, 0)]
	}
	return res, nil
}
