package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// replicas returns n Limiters of limits, each on a store of its own on
// srv: replicas that share a Redis.
func replicas(t *testing.T, srv *redistest.Server, n int, limits ...accounting.Limit) []*accounting.Limiter {
	t.Helper()
	var out []*accounting.Limiter
	for range n {
		l, err := accounting.New(accounting.Options{Store: newStore(t, srv, Options{}), Limits: limits})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		out = append(out, l)
	}
	return out
}

// TestReserveForAcrossReplicas: on Redis, two replicas' batch and
// interactive requests race for one counter with a reserve. The store
// takes each request's capacity as it does for limit_from, so the
// reserve holds across replicas as on one: batch never holds more than
// 70%, and interactive requests asking for the last 30% all get it.
func TestReserveForAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	for _, alg := range []accounting.Algorithm{accounting.SlidingWindow, accounting.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			lim := accounting.Limit{Name: "shared-" + alg.String(), Dimension: accounting.Tokens, Algorithm: alg, Limit: 1000, Window: time.Hour,
				ReserveFor: &accounting.ReserveFor{Attribute: "priority", Value: "interactive", Share: 0.3}}
			ls := replicas(t, srv, 2, lim)
			ask := func(l *accounting.Limiter, priority string, tokens int64) bool {
				res, err := l.Reserve(context.Background(), accounting.Request{
					Attributes: accounting.Attributes{{Name: "priority", Value: priority}},
					Estimate:   accounting.Estimate{InputTokens: tokens}})
				if err != nil {
					t.Error(err)
					return false
				}
				return res.Admitted
			}
			var batch, interactive, refused atomic.Int64
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Go(func() {
					for range 40 {
						if ask(ls[i%2], "batch", 9) {
							batch.Add(9)
						}
					}
				})
			}
			for i := range 4 {
				wg.Go(func() {
					for range 15 {
						if ask(ls[i%2], "interactive", 5) {
							interactive.Add(5)
						} else {
							refused.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got := batch.Load(); got > 700 {
				t.Errorf("batch admitted %d tokens, want at most 700", got)
			}
			if got := interactive.Load(); got != 300 || refused.Load() != 0 {
				t.Errorf("interactive admitted %d tokens with %d refusals, want 300 with none", got, refused.Load())
			}
		})
	}
}

// TestProviderBlockAcrossReplicas: a provider's 429 settled on one
// replica blocks the provider's scope on the other for a minute at most
// (it states no retry-after), for the algorithms that let a block go in
// time, and a token bucket not at all; the remaining figure lowers the
// counter there too. Both replicas' stores and Limiters run on one
// frozen clock, moved by the test.
func TestProviderBlockAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	provider := accounting.Attributes{{Name: "provider", Value: "acct"}, {Name: "model", Value: "gpt-4o"}}
	for _, alg := range []accounting.Algorithm{accounting.SlidingWindow, accounting.FixedWindow, accounting.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			lim := accounting.Limit{Name: "provider-" + alg.String(), Dimension: accounting.Tokens, Scope: []string{"provider", "model"},
				Algorithm: alg, Limit: 10000, Window: time.Minute}
			// 50s into a minute: a fixed window ends within the block.
			clock := &manualClock{now: time.Date(2026, time.March, 2, 9, 0, 50, 0, time.UTC)}
			var stores []*Store
			var ls []*accounting.Limiter
			for range 2 {
				s := newStore(t, srv, Options{})
				s.frozen.Store(clock.Now().UnixMicro())
				l, err := accounting.New(accounting.Options{Store: s, Limits: []accounting.Limit{lim}, Now: clock.Now})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close(context.Background()) })
				stores, ls = append(stores, s), append(ls, l)
			}
			advance := func(d time.Duration) {
				clock.mu.Lock()
				clock.now = clock.now.Add(d)
				clock.mu.Unlock()
				for _, s := range stores {
					s.frozen.Add(d.Microseconds())
				}
			}
			req := accounting.Request{Attributes: provider, Estimate: accounting.Estimate{InputTokens: 100}}

			r, err := ls[0].Reserve(t.Context(), req)
			if err != nil || !r.Admitted {
				t.Fatalf("first request: admitted %v, err %v", r != nil && r.Admitted, err)
			}
			if _, err := r.SettleProvider(t.Context(), accounting.Usage{InputTokens: 100},
				accounting.ProviderState{HasTokens: true, RemainingTokens: 5000}); err != nil {
				t.Fatal(err)
			}
			r, err = ls[1].Reserve(t.Context(), req)
			if err != nil || !r.Admitted {
				t.Fatalf("after the figure: admitted %v, err %v", r != nil && r.Admitted, err)
			}
			if got := r.Dims[accounting.Tokens].Remaining; got != 4900 {
				t.Errorf("the other replica sees %d left after the figure, want 4900", got)
			}
			advance(time.Second)
			if _, err := r.SettleProvider(t.Context(), accounting.Usage{}, accounting.ProviderState{RateLimited: true}); err != nil {
				t.Fatal(err)
			}
			r, err = ls[0].Reserve(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case alg == accounting.TokenBucket && !r.Admitted:
				t.Errorf("a token bucket was blocked: refused by %s", r.Trip.Limit.Name)
			case alg != accounting.TokenBucket && r.Admitted:
				t.Errorf("a replica admitted a request to a provider another replica saw refuse: %d left", r.Dims[accounting.Tokens].Remaining)
			case !r.Admitted && r.Trip.RetryAfter > accounting.MaxProviderBlock:
				t.Errorf("refused until %s, want at most %s", r.Trip.RetryAfter, accounting.MaxProviderBlock)
			}
			advance(accounting.MaxProviderBlock)
			if r, err = ls[0].Reserve(t.Context(), req); err != nil || !r.Admitted {
				t.Errorf("a minute after the 429: admitted %v, err %v, want admitted", r != nil && r.Admitted, err)
			}
		})
	}
}

// TestReserveForLeases: on Redis, a concurrent limit's reserve keeps the
// last slots for the tier, across replicas.
func TestReserveForLeases(t *testing.T) {
	srv := redistest.Start(t)
	lim := accounting.Limit{Name: "slots", Dimension: accounting.Concurrent, Algorithm: accounting.Leases, Limit: 10, Window: time.Minute,
		ReserveFor: &accounting.ReserveFor{Attribute: "priority", Value: "interactive", Share: 0.3}}
	ls := replicas(t, srv, 2, lim)
	take := func(i int, priority string) bool {
		res, err := ls[i%2].Reserve(t.Context(), accounting.Request{Attributes: accounting.Attributes{{Name: "priority", Value: priority}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Admitted
	}
	for i := range 7 {
		if !take(i, "batch") {
			t.Fatalf("batch slot %d refused, want 7 admitted", i+1)
		}
	}
	if take(7, "batch") {
		t.Fatal("an eighth batch request admitted, want the last 3 slots kept")
	}
	for i := range 3 {
		if !take(i, "interactive") {
			t.Fatalf("interactive slot %d refused, want 3 admitted", i+1)
		}
	}
	if take(0, "interactive") {
		t.Fatal("an eleventh request admitted on 10 slots")
	}
}
