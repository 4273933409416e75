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
			if !ok || c.until() <= now {
				return 0, false
			}
			return time.Duration(c.until()-now) * time.Microsecond, true
		},
		Record: func(id string) bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			_, ok := s.recordLocked(id, clock.Now().UnixMicro())
			return ok
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

func TestHoldContract(t *testing.T) {
	storetest.RunHolds(t, func(t *testing.T) storetest.Harness {
		h, _, _ := newHarness(t)
		return h
	})
}

// TestExpiredHoldsAreDropped: a hold nobody takes leaves nothing behind
// once its TTL has passed, and holds do not keep the reservations'
// records from expiring.
func TestExpiredHoldsAreDropped(t *testing.T) {
	h, s, clock := newHarness(t)
	c := accounting.Limit{Name: "held", Algorithm: accounting.FixedWindow, Limit: 1 << 40, Window: time.Hour}
	for i := range 100 {
		id := "hold-" + time.Duration(i).String()
		if err := s.Hold(t.Context(), accounting.HoldRequest{ID: id, Counters: []accounting.Counter{c.Counter(nil)}, TTL: 2 * accounting.RecordTTL, Data: []byte("x")}); err != nil {
			t.Fatalf("Hold: %v", err)
		}
		// A reservation written after the hold, never settled: its record
		// falls due before the hold's.
		if _, err := h.Store.Reserve(t.Context(), accounting.ReserveRequest{ID: "r" + id, Items: []accounting.ReserveItem{{Counter: c.Counter(nil), Amount: 1}}}); err != nil {
			t.Fatalf("Reserve: %v", err)
		}
	}
	clock.Advance(accounting.RecordTTL + accounting.RecordGrain + time.Minute)
	for range 100 {
		_ = s.Ping(t.Context())
		_, _ = s.TakeHold(t.Context(), "none")
	}
	s.mu.Lock()
	records, holds := len(s.records), len(s.holds)
	s.mu.Unlock()
	if records != 100 || holds != 100 {
		t.Fatalf("after the records' TTL: got %d records and %d holds, want 100 of each (the holds')", records, holds)
	}
	clock.Advance(accounting.RecordTTL)
	for range 100 {
		_, _ = s.TakeHold(t.Context(), "none")
	}
	s.mu.Lock()
	records, holds = len(s.records), len(s.holds)
	s.mu.Unlock()
	if records != 0 || holds != 0 {
		t.Errorf("after the holds' TTL: got %d records and %d holds, want none", records, holds)
	}
}

// TestIdleEntriesAreDropped shows that memory tracks active callers and
// requests in flight: a settled reservation leaves nothing behind, and
// once thousands of one-off callers go idle (some of them never settling,
// as when a replica dies), ordinary traffic sweeps their counters and
// records away.
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
		if i%2 == 0 {
			if err := s.Settle(t.Context(), accounting.SettleRequest{ID: "r" + c.Key}); err != nil {
				t.Fatalf("settle %d: %v", i, err)
			}
		}
	}
	s.mu.Lock()
	before, records := len(s.counters), len(s.records)
	s.mu.Unlock()
	if before != callers || records != callers/2 {
		t.Fatalf("before idling: got %d counters and %d records, want %d and %d (one per unsettled reservation)", before, records, callers, callers/2)
	}
	clock.Advance(accounting.RecordTTL + accounting.RecordGrain + time.Minute)
	active := accounting.Limit{Name: "active", Algorithm: accounting.FixedWindow, Limit: 1 << 40, Window: time.Minute}
	for range callers {
		_, _ = h.Store.Reserve(t.Context(), accounting.ReserveRequest{ID: "x", Items: []accounting.ReserveItem{{Counter: active.Counter(nil), Amount: 1}}})
	}
	s.mu.Lock()
	after := len(s.counters)
	records = len(s.records)
	s.mu.Unlock()
	if after > callers/10 || records > callers/10 {
		t.Errorf("entries after idling: got %d counters, %d records, want at most %d each", after, records, callers/10)
	}
}
