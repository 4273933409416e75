package regions

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// testRegion is one region of a small test: a Limiter on its own store,
// leasing from a shared ledger on clock.
type testRegion struct {
	region *Region
	lim    *accounting.Limiter
}

func newTestRegion(t *testing.T, rdb *redis.Client, clock *simClock, name string, global accounting.Limit) testRegion {
	t.Helper()
	store := memstore.New(memstore.Options{Now: clock.Now})
	region, err := New(Options{
		Name: name, Store: store, Ledger: NewLedger(rdb, LedgerOptions{Now: clock.Now, Timeout: time.Minute}),
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
	return testRegion{region: region, lim: lim}
}

// reserve asks for n tokens and reports whether they were admitted,
// settling them at once as used.
func (r testRegion) reserve(t *testing.T, n int64) bool {
	t.Helper()
	return r.reserveUsing(t, n, n)
}

// reserveUsing asks for n tokens and settles an admission as used.
func (r testRegion) reserveUsing(t *testing.T, n, used int64) bool {
	t.Helper()
	res, err := r.lim.Reserve(context.Background(), accounting.Request{
		Attributes: accounting.Attributes{{Name: "model", Value: "m"}},
		Model:      "m",
		Estimate:   accounting.Estimate{InputTokens: n},
	})
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if res.Admitted {
		if _, err := res.Settle(context.Background(), accounting.Usage{InputTokens: used}); err != nil {
			t.Fatalf("Settle: %v", err)
		}
	}
	return res.Admitted
}

func globalLimit(limit int64) accounting.Limit {
	return accounting.Limit{
		Name: "company", Dimension: accounting.Tokens, Algorithm: accounting.FixedWindow,
		Calendar: accounting.CalendarMonth, Limit: limit, AcrossRegions: true,
	}
}

func startLedger(t *testing.T) *redis.Client {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// A region that gives budget back cannot spend it after the ledger gave
// it to another region: what both can spend is the limit.
func TestRegionGivesBackWithoutSpendingTwice(t *testing.T) {
	rdb := startLedger(t)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	global := globalLimit(1000)
	eu := newTestRegion(t, rdb, clock, "eu", global)
	us := newTestRegion(t, rdb, clock, "us", global)

	if !eu.reserve(t, 30) {
		t.Fatal("eu: 30 of 1000 refused, want admitted")
	}
	// eu acquired a chunk (100); it gives back the 70 it did not spend.
	if err := eu.region.Close(context.Background()); err != nil {
		t.Fatalf("eu: Close: %v", err)
	}
	admitted := int64(30)
	for us.reserve(t, 10) {
		admitted += 10
	}
	for eu.reserve(t, 1) {
		admitted++
	}
	if admitted != 1000 {
		t.Errorf("eu and us admitted %d in all, want the limit, 1000", admitted)
	}
}

// A cap acquired in one window never admits in the next: the month
// turns between two requests, and the second is admitted under the new
// month's lease, recorded in the new month's ledger.
func TestRegionWindowTurns(t *testing.T) {
	rdb := startLedger(t)
	clock := &simClock{t: time.Date(2026, 3, 31, 23, 59, 59, 0, time.UTC)}
	global := globalLimit(1000)
	eu := newTestRegion(t, rdb, clock, "eu", global)
	if !eu.reserve(t, 100) {
		t.Fatal("March: 100 of 1000 refused, want admitted")
	}
	clock.Advance(2 * time.Second)
	if !eu.reserve(t, 100) {
		t.Fatal("April: 100 of 1000 refused, want admitted")
	}
	// The first try charged April under March's cap; its release runs in
	// the background, and Close lands it.
	if err := eu.lim.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	counter := global.Counter(accounting.Attributes{{Name: "model", Value: "m"}})
	s, err := eu.region.snapshot(context.Background(), &counter)
	if err != nil {
		t.Fatal(err)
	}
	april := ledgerState(t, rdb, eu.region.window(&counter, s))["eu"]
	if s.used != 100 || april[0] < s.used || s.granted != april[0] {
		t.Errorf("April: used %d under a grant of %d, the ledger granted %d; want 100 used within the ledger's grant, which the store records", s.used, s.granted, april[0])
	}
}

// Sync gives back all but two chunks when more than three are unused,
// and acquires a chunk when less than half of one is left.
func TestRegionSync(t *testing.T) {
	rdb := startLedger(t)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	global := globalLimit(1000) // chunks of 100
	eu := newTestRegion(t, rdb, clock, "eu", global)
	eu.region.m = NewMetrics(nil)
	counter := global.Counter(accounting.Attributes{{Name: "model", Value: "m"}})
	state := func() (left int64, ledger [3]int64) {
		t.Helper()
		s, err := eu.region.snapshot(context.Background(), &counter)
		if err != nil {
			t.Fatal(err)
		}
		return s.granted - s.used, ledgerState(t, rdb, eu.region.window(&counter, s))["eu"]
	}
	steps := []struct {
		name        string
		spend, used int64 // a request first, and what it used
		wantLeft    int64
		wantLedger  [3]int64 // granted, released, used
	}{
		// 450 leased for the request, a chunk after it at the sync.
		{"less than half a chunk left", 450, 450, 100, [3]int64{550, 0, 450}},
		{"again", 80, 80, 120, [3]int64{650, 0, 530}},
		// 280 leased for the request, refunded: 400 unused.
		{"more than three chunks unused", 400, 0, 200, [3]int64{930, 200, 530}},
		{"between", 0, 0, 200, [3]int64{930, 200, 530}},
	}
	for _, st := range steps {
		if st.spend > 0 && !eu.reserveUsing(t, st.spend, st.used) {
			t.Fatalf("%s: %d refused, want admitted", st.name, st.spend)
		}
		if err := eu.region.Sync(context.Background()); err != nil {
			t.Fatalf("%s: Sync: %v", st.name, err)
		}
		if left, ledger := state(); left != st.wantLeft || ledger != st.wantLedger {
			t.Errorf("%s: got %d left, ledger %v; want %d left, ledger %v", st.name, left, ledger, st.wantLeft, st.wantLedger)
		}
		var m dto.Metric
		if err := eu.region.m.unspent.WithLabelValues("eu", counter.Key).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := int64(m.GetGauge().GetValue()); got != st.wantLeft {
			t.Errorf("%s: tokenwarden_region_lease_unspent %d, want %d", st.name, got, st.wantLeft)
		}
	}
}

// gateStore holds the first charge of a region's grants until release
// is closed, so that a test can put another replica's whole acquire in
// between that charge and the snapshot it was computed from.
type gateStore struct {
	accounting.Store
	once          sync.Once
	held, release chan struct{}
}

func (g *gateStore) Reserve(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
	if it := req.Items[0]; strings.HasSuffix(it.Key, grantsKey) && it.Amount > 0 {
		first := false
		g.once.Do(func() { first = true })
		if first {
			close(g.held)
			<-g.release
		}
	}
	return g.Store.Reserve(ctx, req)
}

// Replicas of one region that acquire at once never record more granted
// in the region's store than the ledger granted the region: each raises
// the store's count to what the ledger answered it, never past, even
// when another replica raised it between its look and its charge.
func TestRegionReplicasAcquireAtOnce(t *testing.T) {
	rdb := startLedger(t)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	global := globalLimit(1000)
	store := &gateStore{Store: memstore.New(memstore.Options{Now: clock.Now}), held: make(chan struct{}), release: make(chan struct{})}
	replica := func() *Region {
		r, err := New(Options{
			Name: "eu", Store: store, Ledger: NewLedger(rdb, LedgerOptions{Now: clock.Now, Timeout: time.Minute}),
			Chunk: 0.1, AcquireTimeout: 5 * time.Second, Now: clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := replica(), replica()
	counter := global.Counter(accounting.Attributes{{Name: "model", Value: "m"}})
	aDone := make(chan bool)
	const mark = 0 // neither has a cap yet: any window is new to them
	go func() { aDone <- a.Grow(context.Background(), &counter, 100, mark) }()
	<-store.held // a has 100 from the ledger and is about to record it
	if !b.Grow(context.Background(), &counter, 300, mark) {
		t.Fatal("b: Grow(300) failed, want 300 acquired")
	}
	close(store.release)
	if !<-aDone {
		t.Error("a: Grow(100) failed, want it to find its 100 recorded")
	}
	s, err := a.snapshot(context.Background(), &counter)
	if err != nil {
		t.Fatal(err)
	}
	if g := ledgerState(t, rdb, a.window(&counter, s))["eu"][0]; s.granted != g {
		t.Errorf("the region's store records %d granted, the ledger %d; want the ledger's", s.granted, g)
	}
}
