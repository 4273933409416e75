package regions

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// At the end of a month the budget is spent, so the region's last ask of
// the ledger found it dry; the month turns within RetryAfter of that.
// The dry ledger was last month's: the first request of the new month is
// decided under the new month's lease (admitted when the ledger answers,
// refused when it is down), never failed as a store error. It once
// failed every request for RetryAfter: the region kept last month's cap,
// each reservation was admitted in April under it, released, and tried
// again under the same cap.
func TestAttackWindowTurnsAfterDry(t *testing.T) {
	tests := []struct {
		name       string
		ledgerDown bool
		admitted   bool
	}{
		{"ledger answers", false, true},
		{"ledger down", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := startLedger(t)
			clock := &simClock{t: time.Date(2026, 3, 31, 23, 59, 59, 500_000_000, time.UTC)}
			eu := newTestRegion(t, rdb, clock, "eu", globalLimit(1000))
			for eu.reserve(t, 100) {
			}
			if tt.ledgerDown {
				_ = rdb.Close()
			}
			clock.Advance(600 * time.Millisecond) // April, 0.6s after the ledger was dry
			res, err := eu.lim.Reserve(context.Background(), accounting.Request{
				Attributes: accounting.Attributes{{Name: "model", Value: "m"}},
				Model:      "m",
				Estimate:   accounting.Estimate{InputTokens: 100},
			})
			if err != nil {
				t.Fatalf("first request of April: got error %v, want admitted %v", err, tt.admitted)
			}
			if res.Admitted != tt.admitted {
				t.Errorf("first request of April: got admitted %v, want %v", res.Admitted, tt.admitted)
			}
		})
	}
}

// countingStore counts the reservations made on a store.
type countingStore struct {
	accounting.Store
	reserves atomic.Int64
}

func (c *countingStore) Reserve(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
	c.reserves.Add(1)
	return c.Store.Reserve(ctx, req)
}

// Within a window, a spent budget still keeps refused requests from
// asking again for RetryAfter: the store refused them in the cap's
// window, so Grow takes the dry ledger's word at once, without reading
// the region's store or calling the ledger. Each refusal costs its one
// reservation.
func TestAttackDryWithinWindowAsksNot(t *testing.T) {
	rdb := startLedger(t)
	l := &link{maxDelay: time.Microsecond}
	rdb.AddHook(l)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	store := &countingStore{Store: memstore.New(memstore.Options{Now: clock.Now})}
	region, err := New(Options{
		Name: "eu", Store: store, Ledger: NewLedger(rdb, LedgerOptions{Now: clock.Now, Timeout: time.Minute}),
		Chunk: 0.1, AcquireTimeout: 5 * time.Second, Now: clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := accounting.New(accounting.Options{Store: store, Limits: []accounting.Limit{globalLimit(1000)}, Regional: region})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lim.Close(context.Background()) })
	eu := testRegion{region: region, lim: lim}
	for eu.reserve(t, 100) {
	}
	calls, reserves := l.calls.Load(), store.reserves.Load()
	const n = 20
	for range n {
		if eu.reserve(t, 100) {
			t.Fatal("a request over the spent budget: got admitted, want refused")
		}
	}
	if got := l.calls.Load() - calls; got != 0 {
		t.Errorf("%d refusals within RetryAfter of a dry ledger: got %d ledger calls, want 0", n, got)
	}
	if got := store.reserves.Load() - reserves; got != n {
		t.Errorf("%d refusals within RetryAfter of a dry ledger: got %d reservations on the store, want %d", n, got, n)
	}
}
