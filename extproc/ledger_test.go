package extproc_test

import (
	"context"
	"encoding/binary"
	"flag"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

var (
	ledgerN    = flag.Int("ledger.n", ledgerDefaultN, "lifecycles TestLedger runs across its replicas (the full-size run is 1000000)")
	ledgerSeed = flag.Uint64("ledger.seed", 0, "TestLedger's schedule seed; 0 draws one")
)

const (
	// ledgerReplicas share one Redis; each runs ledgerWorkers
	// lifecycles at once.
	ledgerReplicas = 4
	ledgerWorkers  = 8
	// ledgerAttempts bounds a client's retries of a 503.
	ledgerAttempts = 10000
)

// TestLedger runs -ledger.n request lifecycles (10^4 by default, 5000
// under the race detector; the README has the full-size run of 10^6)
// through 4 replicas — each its own Server, Limiter and Redis client,
// behind its own test Envoy — on one Redis, which is killed and
// restarted, with its data (an append-only file), halfway through. The
// lifecycles are drawn from a seed: OpenAI chat completions and
// Anthropic messages, JSON and SSE, three models, five tenants, whole responses, upstream 5xx, cut streams and
// bodies, clients that leave before or after the response headers, and
// responses that end twice. One tenant has a limit tight enough to
// reject, and a client whose request met the restart retries its 503.
//
// Afterwards, reading the store, every counter must hold exactly what
// the lifecycles' settlements add up to, each worked out from what its
// upstream reported and the documented settlement rules (the basis the
// test predicts, not the server's code); no concurrency lease may be
// held and no reservation record left (0 leaked); every admitted
// reservation must be settled exactly once, on the basis predicted (0
// doubled). The restart may cost 503s to requests that met it — from
// the kill until every replica's client reaches Redis again — which
// charge nothing and never reach the upstream, and settlements and
// releases retried in the background; nothing else: no settlement may
// find its record gone or be given up, and the only records left are
// the tombstones of releases that found nothing to release.
func TestLedger(t *testing.T) {
	n := *ledgerN
	if n < 2*ledgerReplicas {
		t.Fatalf("-ledger.n=%d: want at least %d", n, 2*ledgerReplicas)
	}
	seed := *ledgerSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("-ledger.seed=%d -ledger.n=%d", seed, n)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("to rerun this schedule: go test ./extproc -run 'TestLedger$' -ledger.seed=%d -ledger.n=%d", seed, n)
		}
	})

	srv := redistest.Start(t, redistest.Durable())
	run := newLedgerRun(t, srv, seed, n)
	ctx := context.Background()
	fixedEnd := run.fixedWindowEnd(t)

	start := time.Now()
	var drivers sync.WaitGroup
	for _, rep := range run.replicas {
		for range ledgerWorkers {
			drivers.Go(func() { run.drive(ctx, rep) })
		}
	}
	// Halfway, Redis crashes and comes back with its data. (Every
	// lifecycle counts towards halfway, so it always comes.)
	<-run.halfway
	run.gen.Store(1)
	down := time.Now()
	srv.Kill()
	srv.Restart()
	outage := time.Since(down)
	// A replica's Redis client, refused a few dials, probes the address
	// once a second: until then it refuses, too.
	for _, rep := range run.replicas {
		for err := rep.store.Ping(ctx); err != nil; err = rep.store.Ping(ctx) {
			if time.Since(down) > time.Minute {
				t.Fatalf("replica %d: Redis unreachable a minute after its restart: %v", rep.index, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	reconnected := time.Since(down)
	run.gen.Store(2)
	drivers.Wait()
	for _, rep := range run.replicas {
		rep.envoy.Wait() // every cut stream has settled
	}
	elapsed := time.Since(start)
	for _, rep := range run.replicas {
		closeCtx, cancel := context.WithTimeout(ctx, time.Minute)
		if err := rep.limiter.Close(closeCtx); err != nil {
			t.Errorf("replica %d: %v", rep.index, err)
		}
		cancel()
	}

	b := run.book
	t.Logf("%d lifecycles in %v (%.0f/s) on %d replicas × %d workers; Redis down for %v, every replica served again after %v",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), ledgerReplicas, ledgerWorkers,
		outage.Round(time.Millisecond), reconnected.Round(time.Millisecond))
	t.Logf("kinds: %s; %d of them Anthropic", b.kinds(), b.anthropic)
	t.Logf("admitted %d, rejected %d (429), 503 during the restart %d; settled on %s", b.admitted, b.rejected, b.unavailable, b.bases())
	for _, p := range b.problems {
		t.Error(p)
	}
	if b.nproblems > len(b.problems) {
		t.Errorf("… and %d more problems", b.nproblems-len(b.problems))
	}

	// Every admitted reservation settled once: none awaits its
	// settlement, none settled without a lifecycle or twice.
	if len(b.awaiting) != 0 {
		t.Errorf("leaked: %d admitted reservations never settled, e.g. %s", len(b.awaiting), anyEntry(b.awaiting))
	}
	if len(b.logged) != 0 {
		t.Errorf("doubled: %d settlements of no lifecycle's reservation, or of one twice, e.g. %v", len(b.logged), anyKey(b.logged))
	}
	if b.settlements != b.admitted {
		t.Errorf("settlements logged: got %d, want one per admitted lifecycle, %d", b.settlements, b.admitted)
	}
	if run.book.rejected == 0 && n >= 1000 {
		t.Errorf("no request was rejected: the tight limit of t0 did not bite, and the ledger of rejections went untested")
	}

	run.checkMetrics(t)
	run.checkRecords(t, srv)
	run.checkCounters(t, fixedEnd)
	run.reportRedis(t, srv)
	if w := run.log.warnings(); w != "" {
		t.Logf("warnings and errors logged: %s", w)
	}
}

// ledgerRun is TestLedger's rig and bookkeeping.
type ledgerRun struct {
	seed     uint64
	n        int
	limits   []accounting.Limit
	replicas []*ledgerReplica
	book     *ledgerBook
	log      *ledgerLog
	// gen is 0 before Redis is killed, 1 until every replica reaches
	// it again, 2 after.
	gen      atomic.Int32
	done     atomic.Int64
	halfway  chan struct{}
	halfOnce sync.Once
}

// ledgerReplica is one tokenwarden replica and its share of the schedule.
type ledgerReplica struct {
	index   int
	envoy   *envoytest.Envoy
	limiter *accounting.Limiter
	store   *redisstore.Store
	reg     *prometheus.Registry
	count   int          // its lifecycles
	next    atomic.Int64 // the next one to run
}

func ledgerLimits(n int) []accounting.Limit {
	lifetime := func(name string, d accounting.Dimension, scope ...string) accounting.Limit {
		return accounting.Limit{Name: name, Dimension: d, Scope: scope, Algorithm: accounting.Lifetime,
			Limit: 1 << 50, Window: accounting.MaxWindow}
	}
	tight := lifetime("ledger-t0-tokens", accounting.Tokens, "tenant")
	tight.Match = map[string]string{"tenant": "t0"}
	// About two thirds of what t0's lifecycles settle on.
	tight.Limit = 12 * int64(n)
	return []accounting.Limit{
		lifetime("ledger-tokens", accounting.Tokens, "tenant"),
		lifetime("ledger-cost", accounting.Cost, "tenant"),
		lifetime("ledger-requests", accounting.Requests, "tenant"),
		lifetime("ledger-all-tokens", accounting.Tokens),
		{Name: "ledger-model-tokens", Dimension: accounting.Tokens, Scope: []string{"model"},
			Algorithm: accounting.SlidingWindow, Limit: 1 << 50, Window: accounting.MaxWindow},
		{Name: "ledger-user-tokens", Dimension: accounting.Tokens, Scope: []string{"tenant", "user"},
			Algorithm: accounting.FixedWindow, Limit: 1 << 50, Window: accounting.MaxWindow},
		{Name: "ledger-in-flight", Dimension: accounting.Concurrent, Scope: []string{"tenant"},
			Algorithm: accounting.Leases, Limit: 1 << 20, Window: accounting.MaxLease},
		tight,
	}
}

func newLedgerRun(t *testing.T, srv *redistest.Server, seed uint64, n int) *ledgerRun {
	run := &ledgerRun{seed: seed, n: n, limits: ledgerLimits(n), halfway: make(chan struct{})}
	run.book = newLedgerBook(run.limits)
	run.log = &ledgerLog{book: run.book, counts: map[string]int{}}
	logger := slog.New(run.log)
	prices := accounting.Prices{accounting.DefaultModel: {Input: 5, Output: 15}}
	for _, m := range append(ledgerModels, ledgerClaude) {
		prices[m.name] = accounting.Price{Input: m.inUSD, CachedInput: m.cachedUSD, Output: m.outUSD}
	}
	for i := range ledgerReplicas {
		store, err := redisstore.New(redisstore.Options{URL: srv.URL(), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		reg := prometheus.NewRegistry()
		lim, err := accounting.New(accounting.Options{Store: store, Limits: run.limits, Prices: prices,
			SettleRetry: accounting.MaxSettleRetry, Logger: logger, Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		s, err := extproc.NewServer(extproc.Options{
			Limiter: lim, Identity: tenantIdentity, Counter: ledgerCounter{},
			InjectOutputCap: true, InjectStreamUsage: true, Logger: logger, Registerer: reg,
		})
		if err != nil {
			t.Fatal(err)
		}
		rep := &ledgerReplica{index: i, envoy: envoytest.Start(t, s, s.ServerOptions()...), limiter: lim, store: store, reg: reg,
			count: n / ledgerReplicas}
		if i < n%ledgerReplicas {
			rep.count++
		}
		run.replicas = append(run.replicas, rep)
	}
	return run
}

// drive runs replica rep's lifecycles until none is left.
func (run *ledgerRun) drive(ctx context.Context, rep *ledgerReplica) {
	for {
		seq := int(rep.next.Add(1) - 1)
		if seq >= rep.count {
			return
		}
		run.lifecycle(ctx, rep, newLedgerLife(run.seed, rep.index, seq))
		if run.done.Add(1) == int64(run.n/2) {
			run.halfOnce.Do(func() { close(run.halfway) })
		}
	}
}

// lifecycle runs lf and books what it must cost.
func (run *ledgerRun) lifecycle(ctx context.Context, rep *ledgerReplica, lf *ledgerLife) {
	b := run.book
	req := lf.request()
	var resp *envoytest.Response
	for attempt := 1; ; attempt++ {
		before := run.gen.Load()
		resp = rep.envoy.Do(ctx, req, lf.upstream)
		after := run.gen.Load()
		if resp.Err != nil || !resp.Local || resp.Status != 503 || resp.Metadata != nil {
			break
		}
		// The store could not be reached: refused, nothing charged. Only
		// a request that met the restart may see it.
		b.refused(lf, before, after, lf.chunks != nil)
		if attempt == ledgerAttempts {
			b.problem("%s: still 503 after %d attempts", lf, attempt)
			return
		}
		time.Sleep(time.Millisecond) // the client's backoff before it retries
	}
	b.count(lf)
	if resp.Err != nil {
		b.problem("%s: the filter failed: %v", lf, resp.Err)
		return
	}
	md := resp.Metadata[extproc.MetadataNamespace]
	switch md[extproc.MetaDecision] {
	case "rejected":
		b.reject(lf, resp, md)
		return
	case "admitted":
	default:
		b.problem("%s: status %d with metadata %v: neither admitted nor rejected", lf, resp.Status, md)
		return
	}
	id, _ := md[extproc.MetaReservation].(string)
	if est, want := md[extproc.MetaEstimateTokens], float64(lf.inputEstimate()+lf.outputCap); est != want {
		b.problem("%s: estimate_tokens %v, want %v (the input estimate and the cap)", lf, est, want)
	}
	if lf.chunks == nil {
		b.problem("%s: admitted, and the upstream never called", lf)
		return
	}
	switch lf.kind {
	case lkCut, lkGoneBeforeHeaders, lkGoneAfterHeaders:
		if !resp.Cut {
			b.problem("%s: the response was not cut", lf)
		}
	default:
		var whole []byte
		for _, c := range lf.chunks {
			whole = append(whole, c...)
		}
		if want := lf.status; lf.kind == lkUpstreamError && resp.Status != want || lf.kind != lkUpstreamError && resp.Status != 200 {
			b.problem("%s: status %d reached the client", lf, resp.Status)
		}
		if string(resp.Body) != string(whole) {
			b.problem("%s: the body reached the client altered", lf)
		}
	}
	b.admit(id, lf, lf.expected())
}

// fixedWindowEnd is when the fixed window of ledger-user-tokens ends: a
// run that outlasts it cannot compare that limit's counters.
func (run *ledgerRun) fixedWindowEnd(t *testing.T) time.Time {
	u, err := run.replicas[0].limiter.CounterUsage(context.Background(), "ledger-user-tokens",
		accounting.Attributes{{Name: "tenant", Value: "t0"}, {Name: "user", Value: "u0"}})
	if err != nil {
		t.Fatal(err)
	}
	return time.Now().Add(u.Reset)
}

// checkMetrics holds the replicas' own count of their settlements and
// releases to the ledger: every admitted reservation settled at the
// store once (at once, or by a retry after the restart), none found its
// record gone, none given up.
func (run *ledgerRun) checkMetrics(t *testing.T) {
	t.Helper()
	sum := func(name string, labels ...string) int64 {
		var n float64
		for _, rep := range run.replicas {
			n += gathered(t, rep.reg, name, labels...)
		}
		return int64(n)
	}
	ok, retried := sum("tokenwarden_settlements_total", "ok"), sum("tokenwarden_settlements_total", "retried")
	t.Logf("settlements at the store: %d at once, %d retried after the restart; releases: %d refunded, %d not applied",
		ok, retried, sum("tokenwarden_releases_total", "released"), sum("tokenwarden_releases_total", "not_applied"))
	if ok+retried != run.book.admitted {
		t.Errorf("settlements ok+retried: got %d+%d, want one per admitted lifecycle, %d", ok, retried, run.book.admitted)
	}
	for _, c := range []struct{ name, outcome string }{
		{"tokenwarden_settlements_total", "no_record"},
		{"tokenwarden_settlements_total", "lost"},
		{"tokenwarden_releases_total", "lost"},
	} {
		if got := sum(c.name, c.outcome); got != 0 {
			t.Errorf("%s{outcome=%q}: got %d, want 0", c.name, c.outcome, got)
		}
	}
	if got := sum("tokenwarden_settlements_pending_retry"); got != 0 {
		t.Errorf("tokenwarden_settlements_pending_retry: got %d, want 0", got)
	}
	if got := sum("tokenwarden_requests_total", "openai.chat", "unavailable") +
		sum("tokenwarden_requests_total", "anthropic.messages", "unavailable"); got != run.book.unavailable {
		t.Errorf("tokenwarden_requests_total{outcome=unavailable}: got %d, want the %d 503s the clients saw", got, run.book.unavailable)
	}
}

// checkRecords reads every reservation record key in Redis: none may
// hold a live record (a reservation never settled); the rest are the
// tombstones of releases that found nothing to release.
func (run *ledgerRun) checkRecords(t *testing.T, srv *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	var live, tombstones int64
	iter := admin.Scan(ctx, 0, redisstore.RecordKeyPrefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		v, err := admin.Get(ctx, iter.Val()).Bytes()
		if err == redis.Nil {
			continue // expired meanwhile
		}
		if err != nil || len(v) != 8 {
			t.Fatalf("record %s: %q, %v", iter.Val(), v, err)
		}
		if math.Float64frombits(binary.LittleEndian.Uint64(v)) > 0 {
			live++
		} else {
			tombstones++
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	var notApplied float64
	for _, rep := range run.replicas {
		notApplied += gathered(t, rep.reg, "tokenwarden_releases_total", "not_applied")
	}
	if live != 0 {
		t.Errorf("leaked: %d reservation records left in Redis, want 0", live)
	}
	if tombstones != int64(notApplied) {
		t.Errorf("tombstones in Redis: got %d, want one per release that found nothing, %d", tombstones, int64(notApplied))
	}
}

// checkCounters reads every counter the lifecycles could have touched,
// for every tenant, user and model, and compares it with the ledger.
func (run *ledgerRun) checkCounters(t *testing.T, fixedEnd time.Time) {
	t.Helper()
	ctx := context.Background()
	lim := run.replicas[0].limiter
	fixedOK := time.Now().Before(fixedEnd.Add(-time.Minute))
	if !fixedOK {
		t.Logf("the fixed window of ledger-user-tokens ended during the run: its counters are not compared")
	}
	checked, wrong := 0, 0
	seen := map[string]bool{}
	for tenant := range ledgerTenants {
		for user := -1; user < ledgerUsers; user++ {
			for _, m := range append(ledgerModels, ledgerClaude) {
				attrs := ledgerAttrs(tenant, user, m.name)
				for i := range run.limits {
					l := &run.limits[i]
					key, ok := ledgerKey(l, attrs)
					if !ok || seen[key] || (!fixedOK && l.Algorithm == accounting.FixedWindow) {
						continue
					}
					seen[key] = true
					u, err := lim.CounterUsage(ctx, l.Name, attrs)
					if err != nil {
						t.Fatal(err)
					}
					checked++
					if want := run.book.want[key]; u.Used != want {
						wrong++
						if wrong <= 20 {
							t.Errorf("counter %s: got %d, want %d (off by %+d)", key, u.Used, want, u.Used-want)
						}
					}
				}
			}
		}
	}
	t.Logf("%d counters compared, %d wrong", checked, wrong)
	for key := range run.book.want {
		if !seen[key] && fixedOK {
			t.Errorf("counter %s is in the ledger, and was not compared", key)
		}
	}
}

// reportRedis logs Redis's memory and key count at the end of the run.
func (run *ledgerRun) reportRedis(t *testing.T, srv *redistest.Server) {
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	info, err := admin.Info(ctx, "memory", "persistence").Result()
	if err != nil {
		t.Errorf("INFO: %v", err)
		return
	}
	var fields []string
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "used_memory_human", "used_memory_peak_human", "aof_current_size":
			fields = append(fields, k+"="+v)
		}
	}
	keys, _ := admin.DBSize(ctx).Result()
	t.Logf("Redis at the end: %d keys, %s", keys, strings.Join(fields, ", "))
}
