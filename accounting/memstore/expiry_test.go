package memstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// checkExpiry holds the store to the bound expiry.go promises: the heap
// holds each counter in the map once, in heap order, and the queue holds
// at most 2×records+queueSlack entries, one live entry per record.
func checkExpiry(t *testing.T, s *Store, step string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.heap) != len(s.counters) {
		t.Fatalf("%s: got %d counters in the heap, want %d (the map's)", step, len(s.heap), len(s.counters))
	}
	for i, ct := range s.heap {
		if ct.idx != i {
			t.Fatalf("%s: heap[%d] says it is at %d", step, i, ct.idx)
		}
		if s.counters[ct.key] != ct {
			t.Fatalf("%s: heap[%d] (%q) is not the map's counter", step, i, ct.key)
		}
		if p := (i - 1) / 2; i > 0 && s.heap[p].due > ct.due {
			t.Fatalf("%s: heap[%d] due %d before its parent's %d", step, i, ct.due, s.heap[p].due)
		}
	}
	if n, max := len(s.queue)-s.head, 2*len(s.records)+queueSlack; n > max {
		t.Fatalf("%s: got %d queued records, want at most %d (2×%d records + %d)", step, n, max, len(s.records), queueSlack)
	}
	live := make(map[string]int)
	for _, q := range s.queue[s.head:] {
		if r, ok := s.records[q.id]; ok && r.seq == q.seq {
			live[q.id]++
		}
	}
	for id := range s.records {
		if live[id] != 1 {
			t.Fatalf("%s: record %q has %d live entries in the queue, want 1", step, id, live[id])
		}
	}
}

// TestExpiryBound runs a random mix of every operation, with the clock
// moving by small and large steps (and back), while one reservation is
// never settled and so holds the queue's head for an hour: the queue of
// settled records' entries stays within its bound, and the heap stays
// one entry per counter, through creation, replacement of an expired
// counter, leases returned and counters reset.
func TestExpiryBound(t *testing.T) {
	h, s, clock := newHarness(t)
	rng := rand.New(rand.NewPCG(1, 2))
	limits := []accounting.Limit{
		{Name: "fixed", Algorithm: accounting.FixedWindow, Limit: 1000, Window: time.Minute, Scope: []string{"user"}},
		{Name: "sliding", Algorithm: accounting.SlidingWindow, Limit: 1000, Window: time.Minute, Scope: []string{"user"}},
		{Name: "bucket", Algorithm: accounting.TokenBucket, Limit: 1000, Window: time.Minute, Scope: []string{"user"}},
		{Name: "leases", Algorithm: accounting.Leases, Limit: 50, Scope: []string{"user"}},
	}
	itemOf := func(l accounting.Limit, user int) accounting.ReserveItem {
		c := l.Counter(accounting.Attributes{{Name: "user", Value: fmt.Sprint("u", user)}})
		return accounting.ReserveItem{Counter: c, Amount: 1}
	}
	item := func(user int) accounting.ReserveItem {
		return itemOf(limits[rng.IntN(len(limits))], user)
	}
	ctx := t.Context()
	stuck := accounting.ReserveRequest{ID: "stuck", Items: []accounting.ReserveItem{item(0)}}
	if _, err := s.Reserve(ctx, stuck); err != nil {
		t.Fatal(err)
	}
	var open []accounting.ReserveRequest
	for i := range 20000 {
		step := fmt.Sprintf("step %d", i)
		switch k := rng.IntN(100); {
		case k < 45:
			// Two distinct counters: two limits, one user.
			a := rng.IntN(len(limits))
			b := (a + 1 + rng.IntN(len(limits)-1)) % len(limits)
			user := rng.IntN(200)
			req := accounting.ReserveRequest{ID: fmt.Sprint("r", i), Items: []accounting.ReserveItem{itemOf(limits[a], user), itemOf(limits[b], user)}}
			res, err := h.Store.Reserve(ctx, req)
			if err != nil {
				t.Fatalf("%s: reserve: %v", step, err)
			}
			if res.Admitted {
				open = append(open, req)
			}
		case k < 80 && len(open) > 0:
			j := rng.IntN(len(open))
			req := open[j]
			open = append(open[:j], open[j+1:]...)
			settle := accounting.SettleRequest{ID: req.ID}
			for _, it := range req.Items {
				settle.Items = append(settle.Items, accounting.SettleItem{Counter: it.Counter, Reserved: it.Amount, Actual: 2})
			}
			_ = s.Settle(ctx, settle)
		case k < 90 && len(open) > 0:
			j := rng.IntN(len(open))
			_, _ = s.Release(ctx, open[j])
			open = append(open[:j], open[j+1:]...)
		case k < 92:
			// A release with no reservation: a tombstone.
			_, _ = s.Release(ctx, accounting.ReserveRequest{ID: fmt.Sprint("t", i), Items: []accounting.ReserveItem{item(rng.IntN(200))}})
		case k < 94:
			_, _ = s.ResetCounter(ctx, item(rng.IntN(200)).Counter)
		case k < 99:
			clock.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
		case k < 100:
			if rng.IntN(2) == 0 {
				clock.Advance(10 * time.Minute)
			} else {
				clock.Advance(-time.Minute)
			}
		}
		checkExpiry(t, s, step)
	}
	// Idle past every deadline (a reset's included): ordinary traffic
	// empties what is left but its own counter and record.
	clock.Advance(accounting.ResetKept + 2*accounting.RecordTTL)
	active := accounting.Limit{Name: "active", Algorithm: accounting.FixedWindow, Limit: 1 << 40, Window: time.Minute}
	for range 5000 {
		_, _ = h.Store.Reserve(ctx, accounting.ReserveRequest{ID: "x", Items: []accounting.ReserveItem{{Counter: active.Counter(nil), Amount: 1}}})
	}
	checkExpiry(t, s, "idle")
	s.mu.Lock()
	counters, records := len(s.counters), len(s.records)
	s.mu.Unlock()
	if counters != 1 || records != 1 {
		t.Errorf("after idling: got %d counters, %d records; want 1, 1", counters, records)
	}
}
