package redisstore

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestClockSkew runs Redis with its clock 49h30m ahead of this machine's
// (libfaketime), which is what a replica whose clock is that far behind
// sees. Two Stores (two replicas) agree on every window, and every window
// and duration follows Redis's TIME: the replica's clock plays no part.
func TestClockSkew(t *testing.T) {
	const skew = 49*time.Hour + 30*time.Minute
	srv := redistest.Start(t, redistest.WithClockSkew(skew))
	admin := adminClient(t, srv)
	ctx := context.Background()
	redisTime := func() time.Time {
		t.Helper()
		now, err := admin.Time(ctx).Result()
		if err != nil {
			t.Fatalf("TIME: %v", err)
		}
		return now
	}
	if got := redisTime().Sub(time.Now()); got < skew-time.Minute || got > skew+time.Minute {
		t.Fatalf("Redis clock ahead by %v, want about %v: libfaketime did not take", got, skew)
	}
	a := newStore(t, srv, Options{})
	b := newStore(t, srv, Options{})

	// Where the next hour starts by Redis's clock and by this machine's
	// (half an hour apart), unless an hour boundary is too close.
	for {
		if rem := time.Hour - time.Duration(redisTime().UnixMicro()%time.Hour.Microseconds())*time.Microsecond; rem > 5*time.Second {
			break
		}
		time.Sleep(time.Second)
	}
	fixed := fixedCounter("skew-fixed", 100, time.Hour)
	before := redisTime()
	st := mustReserve(t, a, fixed, 60, true)
	wantIdx, wantEnd := accounting.FixedWindowAt(&fixed, before.UnixMicro())
	localIdx, _ := accounting.FixedWindowAt(&fixed, time.Now().UnixMicro())
	if st.Mark != wantIdx {
		t.Errorf("window: got %d, want %d from Redis's clock (the local clock says %d)", st.Mark, wantIdx, localIdx)
	}
	wantReset := time.Duration(wantEnd-before.UnixMicro()) * time.Microsecond
	if d := st.Reset - wantReset; d > time.Second || d < -time.Second {
		t.Errorf("reset: got %v, want %v by Redis's clock", st.Reset, wantReset)
	}

	// The other replica sees the same window and the same reset.
	st2 := mustReserve(t, b, fixed, 50, false)
	if st2.Mark != st.Mark || st2.Remaining != 40 {
		t.Errorf("replica b: got window %d remaining %d, want %d and 40", st2.Mark, st2.Remaining, st.Mark)
	}
	if d := st2.RetryAfter - st.Reset; d > time.Second || d < -time.Second {
		t.Errorf("replica b retry-after: got %v, want about %v", st2.RetryAfter, st.Reset)
	}
	mustReserve(t, b, fixed, 40, true)

	// A calendar month and a sliding window follow Redis's clock too.
	month := (&accounting.Limit{Name: "skew-month", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth, Limit: 10}).Counter(nil)
	now := redisTime().UnixMicro()
	st = mustReserve(t, b, month, 1, true)
	if idx, _ := accounting.FixedWindowAt(&month, now); st.Mark != idx {
		t.Errorf("month: got %d, want %d", st.Mark, idx)
	}
	sliding := (&accounting.Limit{Name: "skew-sliding", Algorithm: accounting.SlidingWindow, Limit: 10, Window: time.Minute}).Counter(nil)
	now = redisTime().UnixMicro()
	st = mustReserve(t, a, sliding, 10, true)
	if slot := now / accounting.SlotLength(&sliding); st.Mark != slot && st.Mark != slot+1 {
		t.Errorf("sliding slot: got %d, want %d", st.Mark, slot)
	}
	st = mustReserve(t, b, sliding, 1, false)
	if st.RetryAfter < 59*time.Second || st.RetryAfter > 66*time.Second {
		t.Errorf("sliding retry-after on replica b: got %v, want 60s..66s", st.RetryAfter)
	}
}

// TestNoLocalClock pins the reason skew cannot matter: no non-test code
// of the package reads the local clock (deadlines aside, which
// context.WithTimeout sets), but for clockEstimate, which only places
// the boundaries of a time zone's windows around the replica's time:
// Redis's clock picks among them (TestZonedWindowFollowsTheStoreClock).
func TestNoLocalClock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if fn, ok := n.(*ast.FuncDecl); ok && name == "zones.go" && fn.Name.Name == "clockEstimate" {
				return false
			}
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" {
				switch sel.Sel.Name {
				case "Now", "Since", "Until":
					t.Errorf("%s: time.%s: the Store must take time from Redis only", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}

// mustReserve reserves amount on c alone and checks the decision.
func mustReserve(t *testing.T, s *Store, c accounting.Counter, amount int64, admit bool) accounting.CounterState {
	t.Helper()
	res, err := s.Reserve(context.Background(), accounting.ReserveRequest{ID: fmt.Sprint(time.Now().UnixNano()), Items: []accounting.ReserveItem{{Counter: c, Amount: amount}}})
	if err != nil {
		t.Fatalf("Reserve %d on %s: %v", amount, c.Key, err)
	}
	if res.Admitted != admit {
		t.Fatalf("Reserve %d on %s: got admitted %v, want %v (state %+v)", amount, c.Key, res.Admitted, admit, res.States[0])
	}
	return res.States[0]
}

// TestReplicasShareLimit runs concurrent reservations through several
// Stores, each with its own connection pool, as separate replicas would:
// a limit that fits ten reservations admits exactly ten, whatever the
// algorithm and however the requests spread over the replicas.
func TestReplicasShareLimit(t *testing.T) {
	srv := redistest.Start(t)
	tests := []struct {
		replicas, requests int
	}{
		{2, 50},
		{4, 200},
	}
	algorithms := []accounting.Algorithm{accounting.FixedWindow, accounting.SlidingWindow, accounting.TokenBucket}
	for _, tt := range tests {
		stores := make([]*Store, tt.replicas)
		for i := range stores {
			stores[i] = newStore(t, srv, Options{})
		}
		for _, alg := range algorithms {
			t.Run(fmt.Sprintf("%s/%d-replicas/%d-requests", alg, tt.replicas, tt.requests), func(t *testing.T) {
				const amount, fit = 1000, 10
				l := accounting.Limit{Name: fmt.Sprintf("replicas-%s-%d", alg, tt.replicas), Algorithm: alg, Limit: fit * amount, Window: time.Hour}
				c := l.Counter(nil)
				var admitted atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				errs := make(chan error, tt.requests)
				for i := range tt.requests {
					s := stores[i%tt.replicas]
					wg.Go(func() {
						<-start
						res, err := s.Reserve(context.Background(), accounting.ReserveRequest{
							ID: fmt.Sprintf("r%d", i), Items: []accounting.ReserveItem{{Counter: c, Amount: amount}},
						})
						if err != nil {
							errs <- err
							return
						}
						if res.Admitted {
							admitted.Add(1)
						}
					})
				}
				close(start)
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatalf("Reserve: %v", err)
				}
				if got := admitted.Load(); got != fit {
					t.Errorf("admitted: got %d, want exactly %d", got, fit)
				}
			})
		}
	}
}

// TestLimiterReplicas runs the whole reserve → settle cycle through three
// Limiters, each on its own Store, as three tokenwarden replicas: the
// concurrent reservations never exceed the limit and leave none of it
// unused, and once everything has settled every counter equals the sum of
// what the requests really used.
func TestLimiterReplicas(t *testing.T) {
	srv := redistest.Start(t)
	admin := adminClient(t, srv)
	ctx := context.Background()

	const (
		perRequest = 2000 // estimated tokens: 500 in + 1500 out
		fit        = 40   // requests that fit the tight limit
		requests   = 120
	)
	limits := []accounting.Limit{
		{Name: "tenant-tokens", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: fit * perRequest, Window: time.Hour},
		{Name: "tenant-tokens-sliding", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.SlidingWindow, Limit: 1 << 40, Window: time.Hour},
		{Name: "requests", Dimension: accounting.Requests, Algorithm: accounting.FixedWindow, Limit: 1 << 40, Window: time.Hour},
		{Name: "cost", Dimension: accounting.Cost, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1 << 40, Window: time.Hour},
	}
	// Micro-dollars per token, for "m" and (so that the cost limit, which
	// meets every model, is valid) every other model.
	prices := accounting.Prices{"m": {Input: 1, Output: 3}, accounting.DefaultModel: {Input: 1, Output: 3}}
	attrs := accounting.Attributes{{Name: "tenant", Value: "acme"}}

	// Put every replica's clock 30s into an hour, so that no window rolls
	// over while the test runs.
	now, err := admin.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	offset := (time.Hour - time.Duration(now.UnixMicro()%time.Hour.Microseconds())*time.Microsecond + 30*time.Second).Microseconds()

	var limiters []*accounting.Limiter
	for range 3 {
		s := newStore(t, srv, Options{})
		s.offset.Store(offset)
		l, err := accounting.New(accounting.Options{Store: s, Limits: limits, Prices: prices})
		if err != nil {
			t.Fatal(err)
		}
		limiters = append(limiters, l)
	}

	// Phase 1: everyone reserves at once; nobody has settled yet.
	reservations := make([]*accounting.Reservation, requests)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range requests {
		wg.Go(func() {
			<-start
			r, err := limiters[i%len(limiters)].Reserve(ctx, accounting.Request{
				Attributes: attrs, Model: "m", Estimate: accounting.Estimate{InputTokens: 500, OutputTokens: 1500},
			})
			if err != nil {
				t.Errorf("Reserve: %v", err)
				return
			}
			reservations[i] = r
		})
	}
	close(start)
	wg.Wait()
	var admitted []*accounting.Reservation
	for _, r := range reservations {
		if r != nil && r.Admitted {
			admitted = append(admitted, r)
		}
	}
	if len(admitted) != fit {
		t.Fatalf("admitted while nothing had settled: got %d, want exactly %d", len(admitted), fit)
	}

	// Phase 2: everyone settles at once, with its own real usage; some
	// upstream calls failed (zero usage).
	var wantTokens, wantCost atomic.Int64
	for i, r := range admitted {
		usage := accounting.Usage{InputTokens: int64(100 + i*7%400), OutputTokens: int64(i * 37 % 1500)}
		if i%9 == 0 {
			usage = accounting.Usage{}
		}
		if i%5 == 0 {
			usage.OutputTokens += 700 // more than estimated: an extra charge
		}
		wantTokens.Add(usage.Total())
		wantCost.Add(prices["m"].UsageCost(usage))
		wg.Go(func() {
			if ok, err := r.Settle(ctx, usage); !ok || err != nil {
				t.Errorf("Settle: settled %v, err %v", ok, err)
			}
		})
	}
	wg.Wait()

	check := func(name string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: got %d, want %d", name, got, want)
		}
	}
	check("tenant-tokens", fixedUsed(t, admin, limits[0].Counter(attrs).Key), wantTokens.Load())
	check("tenant-tokens-sliding", slidingUsed(t, admin, limits[1].Counter(attrs).Key), wantTokens.Load())
	check("requests", fixedUsed(t, admin, limits[2].Counter(attrs).Key), fit)
	check("cost", fixedUsed(t, admin, limits[3].Counter(attrs).Key), wantCost.Load())
}

// slidingUsed sums a sliding window counter's slots straight from Redis,
// and checks the total it keeps.
func slidingUsed(t testing.TB, admin *redis.Client, key string) int64 {
	t.Helper()
	v, ok := slidingValue(t, admin, key)
	if !ok {
		return 0
	}
	var sum int64
	for _, amt := range v.slots {
		sum += int64(amt)
	}
	if int64(v.total) != sum {
		t.Errorf("sliding window %s: total %d, slots sum to %d", key, int64(v.total), sum)
	}
	return sum
}
