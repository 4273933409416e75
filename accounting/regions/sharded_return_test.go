package regions

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// slotCrashStore stands in for a sharded store that applies a call's
// counters slot by slot: once armed, the first call that charges a
// region's returns counter applies that counter's charge alone (its slot
// ran first) and fails, as a store whose client crashed before the next
// slot.
type slotCrashStore struct {
	accounting.Store
	armed atomic.Bool
}

func (s *slotCrashStore) Reserve(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
	for _, it := range req.Items {
		if strings.HasSuffix(it.Counter.Key, returnsKey) && it.Amount > 0 && s.armed.CompareAndSwap(true, false) {
			if _, err := s.Store.Reserve(ctx, accounting.ReserveRequest{ID: req.ID + "-slot", Items: []accounting.ReserveItem{it}}); err != nil {
				return accounting.ReserveResult{}, err
			}
			return accounting.ReserveResult{}, errors.New("crashed between slots")
		}
	}
	return s.Store.Reserve(ctx, req)
}

// A region gives back what it did not spend, and the store it gives back
// on is sharded: a crash between the two slots of the give-back may lose
// the budget, never let the region spend what it told the ledger it gave
// back. The give-back once charged the spending counter and the returns
// counter in one call, which a sharded store applies slot by slot: a
// crash after the returns slot let the region spend its returns again.
func TestRegionGiveBackCrashBetweenSlots(t *testing.T) {
	rdb := startLedger(t)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	global := globalLimit(1000)
	store := &slotCrashStore{Store: memstore.New(memstore.Options{Now: clock.Now})}
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

	if !eu.reserve(t, 30) {
		t.Fatal("eu: 30 of 1000 refused, want admitted")
	}
	store.armed.Store(true)
	_ = eu.region.Close(context.Background()) // gives back 70, and crashes
	if store.armed.Load() {
		t.Fatal("the give-back never charged the returns counter")
	}
	// The next sync reports what the store holds.
	if err := eu.region.Sync(context.Background()); err != nil {
		t.Fatalf("eu: Sync: %v", err)
	}
	got := drainAll(t, eu, us)
	if total := 30 + got[0] + got[1]; total > global.Limit {
		t.Errorf("eu 30, then after a crash giving back: eu %d, us %d: got %d in all, want at most the limit, %d", got[0], got[1], total, global.Limit)
	}
}
