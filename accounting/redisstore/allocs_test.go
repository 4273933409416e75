package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// reserveSettleAllocs is what a Reserve and its Settle on three counters
// allocate, go-redis included: 45 before the FCALL's keys, function name
// and clock went to go-redis without being boxed and a lone call stopped
// allocating a place in the batcher's queue. Of the 31, the two calls'
// context.WithTimeout make 10 and go-redis's health check of the pooled
// connection 6 (see BENCHMARKS.md, "The Redis store's client side").
const reserveSettleAllocs = 31

// TestReserveSettleAllocs fails when a Reserve and its Settle allocate
// more than the committed figure. Allocations, unlike time, are the same
// on every machine.
func TestReserveSettleAllocs(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, Options{})
	counters := []accounting.Counter{
		fixedCounter("allocs-minute", 1<<40, time.Minute),
		fixedCounter("allocs-hour", 1<<40, time.Hour),
		fixedCounter("allocs-day", 1<<40, 24*time.Hour),
	}
	items := make([]accounting.ReserveItem, len(counters))
	for i, c := range counters {
		items[i] = accounting.ReserveItem{Counter: c, Amount: 10}
	}
	ctx := context.Background()
	var failed error
	got := testing.AllocsPerRun(200, func() {
		res, err := s.Reserve(ctx, accounting.ReserveRequest{ID: "allocs", Items: items})
		if err != nil || !res.Admitted {
			failed = err
			return
		}
		var settle [3]accounting.SettleItem
		for i, c := range counters {
			settle[i] = accounting.SettleItem{Counter: c, Reserved: 10, Actual: 7, Mark: res.States[i].Mark}
		}
		if err := s.Settle(ctx, accounting.SettleRequest{ID: "allocs", Items: settle[:]}); err != nil {
			failed = err
		}
	})
	if failed != nil {
		t.Fatalf("Reserve and Settle: %v", failed)
	}
	if limit := reserveSettleAllocs + raceAllocSlack; got > float64(limit) {
		t.Errorf("allocations per Reserve and Settle: got %.0f, want at most %d", got, limit)
	}
}
