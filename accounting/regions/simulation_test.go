package regions

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// The simulation runs three regions in one process. Each has its own
// store (a memstore: the regional store's behaviour is the Store
// contract, which storetest pins for both stores, and its clock can be
// the simulation's) and its own connection to one real Redis as the
// ledger (the ledger's scripts are the code under test, and only Redis
// runs them). Every clock is the simulation's, so leases lapse when the
// test says and no assertion depends on how fast the machine is; the
// ledger calls pass through a link that adds real latency (0-2ms, which
// shuffles the regions' calls against each other) and can be cut: calls
// then hang until their bound, or fail at once.

// simClock is the simulation's time, shared by stores, ledger and
// regions.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *simClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// link is a region's network path to the ledger: a go-redis hook that
// delays every command and fails it while the region is partitioned.
type link struct {
	// partitioned fails every call at once; hang holds it a while and
	// then fails it as a timeout does, as a partition that drops
	// packets does. (The ledger's own bound is tested in TestLedger;
	// here it is long, so that a loaded machine never trips it.)
	partitioned, hang atomic.Bool
	calls             atomic.Int64
	maxDelay          time.Duration
}

var errPartitioned = errors.New("simulated partition: the ledger is unreachable")

func (l *link) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if l.partitioned.Load() {
			return nil, errPartitioned
		}
		return next(ctx, network, addr)
	}
}

func (l *link) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.calls.Add(1)
		if l.hang.Load() {
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
			}
			cmd.SetErr(context.DeadlineExceeded)
			return context.DeadlineExceeded
		}
		if l.partitioned.Load() {
			cmd.SetErr(errPartitioned)
			return errPartitioned
		}
		// Latency only reorders the regions' calls; nothing waits on it.
		time.Sleep(rand.N(l.maxDelay))
		return next(ctx, cmd)
	}
}

func (l *link) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// simRegion is one region: its store, its Region, its Limiter, and what
// its requests spent.
type simRegion struct {
	name   string
	store  *memstore.Store
	region *Region
	lim    *accounting.Limiter
	link   *link

	mu sync.Mutex
	// spent is what settled requests used; overrun the part of it above
	// their estimates; unsettled the estimates of requests admitted and
	// never settled (the region died with them in flight).
	spent, overrun, unsettled int64
	// admittedAt is the time of the last admission.
	admittedAt time.Time
	// admitted counts admissions.
	admitted int
}

// request reserves one request of estimate est and settles it with a
// random usage (a tenth of them above the estimate); it reports whether
// it was admitted. A request that is not settled (settle false) keeps
// its estimate charged.
func (s *simRegion) request(t *testing.T, clock *simClock, est int64, settle bool) bool {
	ctx := context.Background()
	r, err := s.lim.Reserve(ctx, accounting.Request{
		Attributes: accounting.Attributes{{Name: "model", Value: "m"}},
		Model:      "m",
		Estimate:   accounting.Estimate{InputTokens: est},
	})
	if err != nil {
		t.Errorf("%s: Reserve: %v", s.name, err)
		return false
	}
	if !r.Admitted {
		return false
	}
	actual := rand.N(est + 1)
	if rand.N(10) == 0 {
		actual = est + rand.N(int64(50))
	}
	s.mu.Lock()
	s.admitted++
	s.admittedAt = clock.Now()
	if settle {
		s.spent += actual
		s.overrun += max(0, actual-est)
	} else {
		s.unsettled += est
	}
	s.mu.Unlock()
	if settle {
		if _, err := r.Settle(ctx, accounting.Usage{InputTokens: actual}); err != nil {
			t.Errorf("%s: Settle: %v", s.name, err)
		}
	}
	return true
}

// traffic sends random requests from a few workers per region, all
// regions at once, at the current time.
func traffic(t *testing.T, clock *simClock, regions []*simRegion) {
	var wg sync.WaitGroup
	for _, s := range regions {
		for range 3 {
			wg.Go(func() {
				for range 4 {
					s.request(t, clock, 1+rand.N(int64(600)), true)
				}
			})
		}
	}
	wg.Wait()
}

// drain sends requests of amount from each region in turn until every
// one of them is refused; it returns how many were admitted.
func drain(t *testing.T, clock *simClock, amount int64, regions ...*simRegion) int {
	n := 0
	for {
		any := false
		for _, s := range regions {
			if s.request(t, clock, amount, true) {
				any = true
				n++
			}
		}
		if !any {
			return n
		}
	}
}

func syncAll(t *testing.T, regions ...*simRegion) {
	for _, s := range regions {
		if err := s.region.Sync(context.Background()); err != nil && !s.link.partitioned.Load() && !s.link.hang.Load() {
			t.Errorf("%s: Sync: %v", s.name, err)
		}
	}
}

// ledgerState reads the ledger's record of a window: per region, g, x, u.
func ledgerState(t *testing.T, rdb *redis.Client, w Window) map[string][3]int64 {
	t.Helper()
	h, err := rdb.HGetAll(context.Background(), LedgerKeyPrefix+w.Key+":"+fmt.Sprint(w.Mark)).Result()
	if err != nil {
		t.Fatalf("reading the ledger: %v", err)
	}
	out := make(map[string][3]int64)
	for f, v := range h {
		if f[0] == 'i' {
			continue
		}
		var n int64
		if _, err := fmt.Sscan(v, &n); err != nil {
			t.Fatalf("ledger field %s = %q: %v", f, v, err)
		}
		region, _, _ := strings.Cut(f[2:], "#")
		st := out[region]
		switch f[0] {
		case 'g':
			st[0] += n
		case 'x':
			st[1] += n
		case 'u':
			st[2] += n
		}
		out[region] = st
	}
	return out
}

func counterValue(t *testing.T, c interface{ Write(*dto.Metric) error }) int64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return int64(m.GetCounter().GetValue())
}

func TestSimulation(t *testing.T) {
	const (
		limit = 1_000_000
		ttl   = 30 * time.Second
		grace = 10 * time.Second
	)
	srv := redistest.Start(t)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	metrics := NewMetrics(nil)
	global := accounting.Limit{
		Name: "company", Dimension: accounting.Tokens, Algorithm: accounting.FixedWindow,
		Calendar: accounting.CalendarMonth, Limit: limit, AcrossRegions: true,
		OnStoreError: accounting.FailClosed,
	}

	var rdbs []*redis.Client
	newRegion := func(name string) *simRegion {
		l := &link{maxDelay: 2 * time.Millisecond}
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
		rdb.AddHook(l)
		rdbs = append(rdbs, rdb)
		t.Cleanup(func() { _ = rdb.Close() })
		store := memstore.New(memstore.Options{Now: clock.Now})
		region, err := New(Options{
			Name: name, Store: store, Ledger: NewLedger(rdb, LedgerOptions{Now: clock.Now, Timeout: time.Minute}),
			Chunk: 0.02, LeaseTTL: ttl, Grace: grace, SyncInterval: 5 * time.Second,
			AcquireTimeout: time.Minute, RetryAfter: time.Second,
			Now: clock.Now, Metrics: metrics,
		})
		if err != nil {
			t.Fatal(err)
		}
		lim, err := accounting.New(accounting.Options{Store: store, Limits: []accounting.Limit{global}, Regional: region})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lim.Close(context.Background()) })
		return &simRegion{name: name, store: store, region: region, lim: lim, link: l}
	}
	eu, us, ap := newRegion("eu"), newRegion("us"), newRegion("ap")
	all := []*simRegion{eu, us, ap}
	counter := global.Counter(accounting.Attributes{{Name: "model", Value: "m"}})
	snap := func(s *simRegion) snapshot {
		t.Helper()
		sn, err := s.region.snapshot(context.Background(), &counter)
		if err != nil {
			t.Fatal(err)
		}
		return sn
	}
	step := func(live ...*simRegion) {
		traffic(t, clock, live)
		clock.Advance(time.Second)
		if clock.Now().Second()%5 == 0 {
			syncAll(t, live...)
		}
	}

	// All three regions spend for 30s.
	for range 30 {
		step(all...)
	}

	// ap is cut off from the ledger: it spends what it holds, never
	// more, and nothing once its lease lapses, 30s after it last
	// reached the ledger at the latest.
	// Its calls hang for the first 30s, then fail at once.
	ap.link.hang.Store(true)
	cut := clock.Now()
	before := snap(ap)
	for i := range 60 {
		if i == 30 {
			ap.link.hang.Store(false)
			ap.link.partitioned.Store(true)
		}
		step(all...)
	}
	after := snap(ap)
	if after.granted != before.granted {
		t.Errorf("partitioned ap's grant went from %d to %d, want it unchanged", before.granted, after.granted)
	}
	if after.used > after.granted+ap.overrun {
		t.Errorf("partitioned ap used %d of a lease of %d (settlement overrun %d), want at most the lease plus the overrun", after.used, after.granted, ap.overrun)
	}
	if !ap.admittedAt.Before(cut.Add(ttl)) {
		t.Errorf("partitioned ap admitted a request at %s, want none from %s (its lease TTL after the cut)", ap.admittedAt, cut.Add(ttl))
	}
	for _, op := range []string{"report", "acquire"} {
		if got := counterValue(t, metrics.ledgerErrs.WithLabelValues(op)); got == 0 {
			t.Errorf("no ledger %s errors counted for the partition, want some", op)
		}
	}
	ap.link.partitioned.Store(false)
	syncAll(t, all...)

	// us reports, admits requests it never settles, and dies. Its lease
	// stays its own until lease_ttl+grace after its last report; then
	// the ledger gives the unreported part to the others.
	if err := us.region.Sync(context.Background()); err != nil {
		t.Fatalf("us: Sync: %v", err)
	}
	died := clock.Now()
	for range 5 {
		us.request(t, clock, 500, false)
	}
	survivors := []*simRegion{eu, ap}
	drain(t, clock, 1000, survivors...)
	drain(t, clock, 1, survivors...)
	w := eu.region.window(&counter, snap(eu))
	st := ledgerState(t, rdbs[0], w)
	t.Logf("ledger at us death (window %+v): %v; spent eu %d us %d ap %d", w, st, eu.spent, us.spent, ap.spent)
	usHeld := st["us"][0] - st["us"][1]
	if usHeld <= st["us"][2] {
		t.Fatalf("us held %d and reported %d at its death, want an unused lease for the test to mean anything", usHeld, st["us"][2])
	}
	clock.Advance(ttl + grace)
	syncAll(t, survivors...)
	if n := drain(t, clock, 1, survivors...); n != 0 {
		t.Errorf("survivors admitted %d requests at lease_ttl+grace after us died, want 0 (its lease is not lapsed yet)", n)
	}
	clock.Advance(time.Second)
	reclaimedBefore := counterValue(t, metrics.reclaimedBy)
	syncAll(t, survivors...)
	if got, want := counterValue(t, metrics.reclaimedBy)-reclaimedBefore, usHeld-st["us"][2]; got != want {
		t.Errorf("reclaimed %d from dead us, want its unreported lease %d", got, want)
	}
	if n := drain(t, clock, 1000, survivors...) + drain(t, clock, 1, survivors...); n == 0 {
		t.Error("survivors admitted nothing after us's lease lapsed, want its unused lease spent")
	}
	syncAll(t, survivors...)
	drain(t, clock, 1, survivors...)

	// No budget is lost: the ledger has nothing free, and no survivor
	// holds a lease it could still spend.
	st = ledgerState(t, rdbs[0], w)
	var held int64
	for name, s := range st {
		held += max(s[0]-s[1], s[2])
		t.Logf("ledger: %s granted %d, released %d, reported use %d", name, s[0], s[1], s[2])
	}
	if held < limit {
		t.Errorf("the ledger holds %d for the regions, want the whole limit %d (no budget lost)", held, limit)
	}
	if s := st["us"]; s[0]-s[1] != s[2] {
		t.Errorf("dead us holds %d with a reported use of %d, want its lease cut to its use", s[0]-s[1], s[2])
	}
	for _, s := range survivors {
		sn := snap(s)
		if left := sn.granted - sn.used; left > 0 {
			t.Errorf("%s has %d of its lease left unspent after draining, want 0", s.name, left)
		}
	}

	// The bound: what the regions spent is at most the limit, plus what
	// the ledger reclaimed from regions that were silent (what they
	// spent unreported), plus settlements above their estimates.
	var spent, overrun int64
	for _, s := range all {
		spent += s.spent + s.unsettled
		overrun += s.overrun
		t.Logf("%s: %d admitted, spent %d (overrun %d, unsettled %d)", s.name, s.admitted, s.spent, s.overrun, s.unsettled)
	}
	reclaimed := counterValue(t, metrics.reclaimedBy)
	t.Logf("spent %d of %d; reclaimed %d, overrun %d; ledger calls: eu %d, us %d, ap %d; died at %s",
		spent, limit, reclaimed, overrun, eu.link.calls.Load(), us.link.calls.Load(), ap.link.calls.Load(), died.Format(time.TimeOnly))
	if bound := limit + reclaimed + overrun; spent > bound {
		t.Errorf("the regions spent %d, want at most limit+reclaimed+overrun = %d+%d+%d = %d", spent, limit, reclaimed, overrun, bound)
	}
	if spent < limit-int64(len(all)) {
		t.Errorf("the regions spent %d, want the whole limit %d", spent, limit)
	}
}
