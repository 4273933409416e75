package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// sampleSize is how many entries each operation inspects for expiry.
// Inspecting more than one per operation makes expired entries go faster
// than new ones arrive, so the maps shrink back once callers go idle.
const sampleSize = 8

// Options configure a Store. The zero value is the default.
type Options struct {
	// Now is the store's clock; nil means time.Now.
	Now func() time.Time
}

// Store is an in-memory accounting.Store, safe for concurrent use.
type Store struct {
	now func() time.Time

	mu       sync.Mutex
	counters map[string]*counter
	settled  map[string]int64 // reservation ID → when it may be forgotten (µs)
}

var _ accounting.Store = (*Store)(nil)

// New returns an empty Store.
func New(opts Options) *Store {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{
		now:      now,
		counters: make(map[string]*counter),
		settled:  make(map[string]int64),
	}
}

// Reserve implements accounting.Store.
func (s *Store) Reserve(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
	if err := ctx.Err(); err != nil {
		return accounting.ReserveResult{}, err
	}
	res := accounting.ReserveResult{States: make([]accounting.CounterState, len(req.Items))}
	now := s.now().UnixMicro()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireSampleLocked(now)

	res.Admitted = true
	for i := range req.Items {
		it := &req.Items[i]
		res.States[i] = s.counterLocked(&it.Counter, now).check(&it.Counter, it.Amount, now)
		if !res.States[i].Fits {
			res.Admitted = false
		}
	}
	if !res.Admitted {
		return res, nil
	}
	for i := range req.Items {
		it := &req.Items[i]
		s.counters[it.Key].commit(&it.Counter, it.Amount, now, &res.States[i])
	}
	return res, nil
}

// Settle implements accounting.Store.
func (s *Store) Settle(ctx context.Context, req accounting.SettleRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.now().UnixMicro()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireSampleLocked(now)
	if until, ok := s.settled[req.ID]; ok && until > now {
		return nil
	}
	s.settled[req.ID] = now + accounting.SettledTTL.Microseconds()
	for i := range req.Items {
		it := &req.Items[i]
		if it.Actual == it.Reserved {
			continue
		}
		s.counterLocked(&it.Counter, now).settle(&it.Counter, it.Reserved, it.Actual, it.Mark, now)
	}
	return nil
}

// Ping implements accounting.Store; memory is always reachable.
func (s *Store) Ping(ctx context.Context) error { return ctx.Err() }

// Len reports how many counters and remembered settlement IDs the store
// holds that have not expired, for tests and metrics.
func (s *Store) Len() (counters, settled int) {
	now := s.now().UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.counters {
		if c.expires > now {
			counters++
		}
	}
	for _, until := range s.settled {
		if until > now {
			settled++
		}
	}
	return counters, settled
}

// Exists reports whether key holds a live counter.
func (s *Store) Exists(key string) bool {
	now := s.now().UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.counters[key]
	return ok && c.expires > now
}

// counterLocked returns key's counter, replacing an expired one with a
// fresh one so that stale state is never read.
func (s *Store) counterLocked(c *accounting.Counter, now int64) *counter {
	ct, ok := s.counters[c.Key]
	if !ok || ct.expires <= now {
		ct = newCounter(c, now)
		s.counters[c.Key] = ct
	}
	return ct
}

// expireSampleLocked drops expired entries among a few arbitrary ones; Go
// starts each map iteration at a random point.
func (s *Store) expireSampleLocked(now int64) {
	n := 0
	for k, c := range s.counters {
		if c.expires <= now {
			delete(s.counters, k)
		}
		if n++; n == sampleSize {
			break
		}
	}
	n = 0
	for id, until := range s.settled {
		if until <= now {
			delete(s.settled, id)
		}
		if n++; n == sampleSize {
			break
		}
	}
}
