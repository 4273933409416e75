package memstore

import (
	"sync"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/storetest"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newHarness(t *testing.T) (storetest.Harness, *Store, *fakeClock) {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 250_000_000, time.UTC)}
	s := New(Options{Now: clock.Now})
	h := storetest.Harness{
		Store:   s,
		Now:     clock.Now,
		Advance: clock.Advance,
		TTL: func(key string) (time.Duration, bool) {
			s.mu.Lock()
			defer s.mu.Unlock()
			c, ok := s.counters[key]
			now := clock.Now().UnixMicro()
			if !ok || c.expires <= now {
				return 0, false
			}
			return time.Duration(c.expires-now) * time.Microsecond, true
		},
	}
	return h, s, clock
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		h, _, _ := newHarness(t)
		return h
	})
}

// TestIdleEntriesAreDropped shows that memory tracks active callers: once
// thousands of one-off callers go idle, ordinary traffic sweeps their
// counters and settlement IDs away.
func TestIdleEntriesAreDropped(t *testing.T) {
	h, s, clock := newHarness(t)
	const callers = 5000
	for i := range callers {
		l := accounting.Limit{Name: "per-user", Algorithm: accounting.FixedWindow, Limit: 10, Window: time.Minute, Scope: []string{"user"}}
		c := l.Counter(accounting.Attributes{{Name: "user", Value: string(rune('a'+i%26)) + time.Duration(i).String()}})
		res, err := h.Store.Reserve(t.Context(), accounting.ReserveRequest{ID: "r" + c.Key, Items: []accounting.ReserveItem{{Counter: c, Amount: 1}}})
		if err != nil || !res.Admitted {
			t.Fatalf("reserve %d: admitted=%v err=%v", i, res.Admitted, err)
		}
		_ = s.Settle(t.Context(), accounting.SettleRequest{ID: "r" + c.Key})
	}
	s.mu.Lock()
	before := len(s.counters)
	s.mu.Unlock()
	if before != callers {
		t.Fatalf("counters before idling: got %d, want %d", before, callers)
	}
	clock.Advance(accounting.SettledTTL + time.Minute)
	active := accounting.Limit{Name: "active", Algorithm: accounting.FixedWindow, Limit: 1 << 40, Window: time.Minute}
	for range callers {
		_, _ = h.Store.Reserve(t.Context(), accounting.ReserveRequest{ID: "x", Items: []accounting.ReserveItem{{Counter: active.Counter(nil), Amount: 1}}})
	}
	s.mu.Lock()
	after, settled := len(s.counters), len(s.settled)
	s.mu.Unlock()
	if after > callers/10 || settled > callers/10 {
		t.Errorf("entries after idling: got %d counters, %d settlement IDs, want at most %d each", after, settled, callers/10)
	}
}
