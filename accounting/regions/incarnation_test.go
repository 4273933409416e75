package regions

import (
	"context"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// drainAll reserves 10 at a time on each region in turn until none
// admits, and returns what each admitted.
func drainAll(t *testing.T, regions ...testRegion) []int64 {
	t.Helper()
	got := make([]int64, len(regions))
	for more := true; more; {
		more = false
		for i, r := range regions {
			if r.reserve(t, 10) {
				got[i] += 10
				more = true
			}
		}
	}
	return got
}

// A region's store forgets its counters (a restart without persistence,
// a flush, a failover to an empty replica) after the region spent its
// share: the region, on its emptied store, is a new incarnation, and the
// ledger writes off what the last one held, so it admits nothing more
// of a spent budget. It once raised its cap to everything the ledger
// had granted it under its name, on a spending counter back at zero:
// 2,000 admitted on a limit of 1,000.
func TestRegionStoreForgets(t *testing.T) {
	rdb := startLedger(t)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	global := globalLimit(1000)
	eu := newTestRegion(t, rdb, clock, "eu", global)
	us := newTestRegion(t, rdb, clock, "us", global)
	before := drainAll(t, eu, us)
	if err := eu.region.Sync(context.Background()); err != nil {
		t.Fatalf("eu: Sync: %v", err)
	}
	eu2 := newTestRegion(t, rdb, clock, "eu", global) // eu, on an empty store
	eu2.region.m = NewMetrics(nil)
	after := drainAll(t, eu2)
	if total := before[0] + before[1] + after[0]; total > global.Limit {
		t.Errorf("eu %d and us %d, then eu on an emptied store %d: got %d in all, want at most the limit, %d", before[0], before[1], after[0], total, global.Limit)
	}
	counter := global.Counter(accounting.Attributes{{Name: "model", Value: "m"}})
	if got := counterValue(t, eu2.region.m.writtenOff.WithLabelValues(counter.Key)); got <= 0 {
		t.Errorf("written-off metric after the store forgot a spent lease: got %d, want more than 0", got)
	}
}

// Two regions configured with one name, each on its own store: each is
// capped by what the ledger granted its own incarnation, so together
// they admit at most the limit. They once each raised their cap to
// everything granted under the name: 2,000 on 1,000.
func TestRegionNameShared(t *testing.T) {
	rdb := startLedger(t)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	global := globalLimit(1000)
	a := newTestRegion(t, rdb, clock, "eu", global)
	b := newTestRegion(t, rdb, clock, "eu", global)
	got := drainAll(t, a, b)
	if err := a.region.Sync(context.Background()); err != nil {
		t.Fatalf("a: Sync: %v", err)
	}
	if err := b.region.Sync(context.Background()); err != nil {
		t.Fatalf("b: Sync: %v", err)
	}
	more := drainAll(t, a, b)
	if total := got[0] + got[1] + more[0] + more[1]; total > global.Limit {
		t.Errorf("two regions named eu: got %d admitted in all (%v then %v), want at most the limit, %d", total, got, more, global.Limit)
	}
}

// swapStore is a store that can forget everything at once: a Redis
// restarted without persistence, or flushed.
type swapStore struct {
	accounting.Store
	clock *simClock
}

func (s *swapStore) forget() { s.Store = memstore.New(memstore.Options{Now: s.clock.Now}) }

// A running region's store forgets its counters: once the region has
// synced, it is a new incarnation holding only what the ledger grants
// it from then on, whatever it was granted before.
func TestRegionStoreForgetsUnderARunningRegion(t *testing.T) {
	rdb := startLedger(t)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	global := globalLimit(1000)
	store := &swapStore{clock: clock}
	store.forget()
	region, err := New(Options{
		Name: "eu", Store: store, Ledger: NewLedger(rdb, LedgerOptions{Now: clock.Now, Timeout: time.Minute}),
		Chunk: 0.1, AcquireTimeout: 5 * time.Second, Now: clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := accounting.New(accounting.Options{Store: store, Limits: []accounting.Limit{global}, Regional: region})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lim.Close(context.Background()) })
	eu := testRegion{region: region, lim: lim}
	us := newTestRegion(t, rdb, clock, "us", global)
	before := drainAll(t, eu, us)
	store.forget()
	if err := eu.region.Sync(context.Background()); err != nil {
		t.Fatalf("eu: Sync: %v", err)
	}
	after := drainAll(t, eu, us)
	if total := before[0] + before[1] + after[0] + after[1]; total > global.Limit {
		t.Errorf("eu %d and us %d, eu's store forgot, then eu %d and us %d: got %d in all, want at most the limit, %d",
			before[0], before[1], after[0], after[1], total, global.Limit)
	}
}
