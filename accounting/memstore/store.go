package memstore

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

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
	// records maps a reservation ID to its time (µs), or to minus the
	// time of the release that left a tombstone. Either counts until
	// accounting.RecordTTL after that time.
	records map[string]record
	// skipped holds, for a record whose reservation left optional items
	// uncharged, their indexes: Release must not refund them. Most
	// reservations have none, and no entry.
	skipped map[string][]int

	// heap holds every counter by its deadline; queue holds the records'
	// expiries from head on, oldest first; seq numbers the records'
	// writes (see expiry.go).
	heap  []*counter
	queue []queued
	head  int
	seq   uint64

	// holds keeps the holds' data, and holdQueue their expiries (see
	// holds.go).
	holds     map[string]hold
	holdQueue []queued
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
		records:  make(map[string]record),
		skipped:  make(map[string][]int),
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
	s.expireLocked(now)
	now = s.afterResetsLocked(req.Items, now)

	res.Admitted = true
	var skipped []int
	for i := range req.Items {
		it := &req.Items[i]
		res.States[i] = s.counterLocked(&it.Counter, now).check(&it.Counter, it.Amount, now)
		switch {
		case res.States[i].Fits:
		case it.Optional:
			skipped = append(skipped, i)
		default:
			res.Admitted = false
		}
	}
	if !res.Admitted {
		return res, nil
	}
	if t, ok := s.recordLocked(req.ID, now); ok && t < 0 {
		return accounting.ReserveResult{}, accounting.ErrReleased
	}
	s.setRecordLocked(req.ID, now)
	delete(s.skipped, req.ID)
	if skipped != nil {
		s.skipped[req.ID] = skipped
	}
	for i := range req.Items {
		it := &req.Items[i]
		if !res.States[i].Fits {
			// An optional item that does not fit: not charged.
			continue
		}
		if it.Algorithm == accounting.Leases {
			s.counters[it.Key].takeLease(&it.Counter, req.ID, it.Amount, now, &res.States[i])
			continue
		}
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
	s.expireLocked(now)
	t, ok := s.recordLocked(req.ID, now)
	if !ok || t < 0 {
		return accounting.ErrNoReservation
	}
	s.deleteRecordLocked(req.ID)
	for i := range req.Items {
		it := &req.Items[i]
		if it.Algorithm == accounting.Leases {
			// A settlement returns the lease, whatever its amounts.
			s.returnLeaseLocked(it.Key, req.ID)
			continue
		}
		live := s.liveLocked(it.Key, now)
		if it.Epoch != s.bornLocked(it.Key, now) {
			// The counter was reset since the reservation.
			continue
		}
		if it.Actual == it.Reserved && !live {
			// Nothing to book, and nothing held in flight.
			continue
		}
		s.counterLocked(&it.Counter, now).settle(&it.Counter, it.Reserved, it.Actual, it.Mark, t, now)
	}
	return nil
}

// bornLocked is the born (CounterState.Epoch) of key's counter.
func (s *Store) bornLocked(key string, now int64) int64 {
	if ct, ok := s.counters[key]; ok && ct.until() > now {
		return ct.born
	}
	return 0
}

// afterResetsLocked returns the time a reservation on items made at now
// runs at: just after the last reset of any of their counters, if that
// is later. A reset at now leaves its counter born now+1, so that a
// reservation made in the same instant before it (which counts as made
// before the reset) and one made after it (which counts as made after)
// are told apart.
func (s *Store) afterResetsLocked(items []accounting.ReserveItem, now int64) int64 {
	at := now
	for i := range items {
		at = max(at, s.bornLocked(items[i].Key, now))
	}
	return at
}

// Release implements accounting.Store.
func (s *Store) Release(ctx context.Context, req accounting.ReserveRequest) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	now := s.now().UnixMicro()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	t, ok := s.recordLocked(req.ID, now)
	switch {
	case ok && t < 0:
		return false, nil
	case !ok:
		s.deleteRecordLocked(req.ID)
		// A copy: the ID may share its string with the reservation's
		// counter keys (accounting builds them together), and the
		// tombstone outlives the reservation.
		s.setRecordLocked(strings.Clone(req.ID), -now)
		return false, nil
	}
	skipped := s.skipped[req.ID]
	s.deleteRecordLocked(req.ID)
	for i := range req.Items {
		it := &req.Items[i]
		if slices.Contains(skipped, i) {
			// Not charged (no lease taken): nothing to give back.
			continue
		}
		if it.Algorithm == accounting.Leases {
			s.returnLeaseLocked(it.Key, req.ID)
			continue
		}
		if it.Amount == 0 || t < s.bornLocked(it.Key, now) {
			// Nothing charged, or the counter was reset since.
			continue
		}
		ct := s.counterLocked(&it.Counter, now)
		mark := markAt(&it.Counter, t)
		if it.Algorithm == accounting.Lifetime {
			// The run the reservation was charged to, if it still is.
			mark = ct.window
		}
		ct.settle(&it.Counter, it.Amount, 0, mark, t, now)
	}
	return true, nil
}

// recordLocked returns the record or tombstone kept for id, if one still
// counts.
func (s *Store) recordLocked(id string, now int64) (int64, bool) {
	r, ok := s.records[id]
	if !ok || !recordLive(r.t, now) {
		return 0, false
	}
	return r.t, true
}

// recordLive reports whether a record or tombstone of time t still counts.
func recordLive(t, now int64) bool {
	if t < 0 {
		t = -t
	}
	return accounting.RecordExpiry(t) > now
}

// Ping implements accounting.Store; memory is always reachable.
func (s *Store) Ping(ctx context.Context) error { return ctx.Err() }

// Len reports how many counters and reservation records (tombstones
// included) the store holds that have not expired, for tests and metrics.
func (s *Store) Len() (counters, records int) {
	now := s.now().UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.counters {
		if c.until() > now {
			counters++
		}
	}
	for _, r := range s.records {
		if recordLive(r.t, now) {
			records++
		}
	}
	return counters, records
}

// Exists reports whether key holds a live counter.
func (s *Store) Exists(key string) bool {
	now := s.now().UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.liveLocked(key, now)
}

// liveLocked reports whether key holds a counter that has not expired.
func (s *Store) liveLocked(key string, now int64) bool {
	c, ok := s.counters[key]
	return ok && c.until() > now
}

// counterLocked returns key's counter, replacing an expired one with a
// fresh one so that stale state is never read.
func (s *Store) counterLocked(c *accounting.Counter, now int64) *counter {
	ct, ok := s.counters[c.Key]
	switch {
	case !ok:
		ct = newCounter(c, now)
		// A copy: the key may share its string with the reservation's
		// ID and other keys (accounting builds them together), and the
		// counter outlives the reservation.
		ct.key = strings.Clone(c.Key)
		s.counters[ct.key] = ct
		s.scheduleCounterLocked(ct, now)
	case ct.until() <= now:
		// Expired but not yet dropped: start afresh in its place, which
		// keeps its key and its place in the heap.
		ct.reset(c, now)
	case ct.expires <= now:
		// Its state expired, but something keeps the counter.
		ct.refresh(c, now)
	}
	return ct
}
