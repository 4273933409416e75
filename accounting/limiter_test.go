package accounting_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

func newLimiter(t testing.TB, store accounting.Store, limits ...accounting.Limit) *accounting.Limiter {
	t.Helper()
	l, err := accounting.New(accounting.Options{
		Store:       store,
		Limits:      limits,
		Prices:      accounting.Prices{"cheap": {Input: 1, Output: 2}, "default": {Input: 10, Output: 30}},
		SettleRetry: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

var tenant = accounting.Attributes{{Name: "tenant", Value: "t1"}}

func limit(name string, d accounting.Dimension, n int64, scope ...string) accounting.Limit {
	return accounting.Limit{Name: name, Dimension: d, Scope: scope, Algorithm: accounting.FixedWindow, Limit: n, Window: time.Hour}
}

func TestReserveChargesEachDimension(t *testing.T) {
	store := memstore.New(memstore.Options{})
	l := newLimiter(t, store,
		limit("rpm", accounting.Requests, 10, "tenant"),
		limit("tpm", accounting.Tokens, 10000, "tenant"),
		limit("spend", accounting.Cost, 1_000_000, "tenant"),
		limit("other-tenant-only", accounting.Tokens, 1, "user"), // no user: does not apply
	)
	r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Model: "cheap",
		Estimate: accounting.Estimate{InputTokens: 100, OutputTokens: 400}})
	if err != nil || !r.Admitted {
		t.Fatalf("Reserve: admitted=%v err=%v", r != nil && r.Admitted, err)
	}
	// cost: 100 × $1/M + 400 × $2/M = 900 micro-dollars.
	if r.Cost != 900 {
		t.Errorf("estimate cost: got %d µ$, want 900", r.Cost)
	}
	want := map[accounting.Dimension]int64{accounting.Requests: 9, accounting.Tokens: 9500, accounting.Cost: 1_000_000 - 900}
	for d, rem := range want {
		if st := r.Dims[d]; !st.Applied || st.Remaining != rem {
			t.Errorf("%s: got %+v, want remaining %d", d, st, rem)
		}
	}
	// Settle with real usage: 50 in (10 cached at the input price, as no
	// cached price is set), 20 out → 90 µ$.
	ok, err := r.Settle(t.Context(), accounting.Usage{InputTokens: 50, CachedInputTokens: 10, OutputTokens: 20})
	if !ok || err != nil {
		t.Fatalf("Settle: %v %v", ok, err)
	}
	r2, _ := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Model: "cheap", Estimate: accounting.Estimate{}})
	want = map[accounting.Dimension]int64{accounting.Requests: 8, accounting.Tokens: 10000 - 70, accounting.Cost: 1_000_000 - 90}
	for d, rem := range want {
		if st := r2.Dims[d]; st.Remaining != rem {
			t.Errorf("after settle, %s remaining: got %d, want %d", d, st.Remaining, rem)
		}
	}
}

func TestSettleExactlyOnce(t *testing.T) {
	l := newLimiter(t, memstore.New(memstore.Options{}), limit("tpm", accounting.Tokens, 1000, "tenant"))
	r, _ := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 500}})
	var settled atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if ok, _ := r.Settle(context.Background(), accounting.Usage{InputTokens: 100}); ok {
				settled.Add(1)
			}
		})
	}
	wg.Wait()
	if settled.Load() != 1 {
		t.Errorf("settlements: got %d, want 1", settled.Load())
	}
	r2, _ := l.Reserve(t.Context(), accounting.Request{Attributes: tenant})
	if got := r2.Dims[accounting.Tokens].Remaining; got != 900 {
		t.Errorf("remaining: got %d, want 900", got)
	}
}

func TestTripNamesTheLimitThatFreesLast(t *testing.T) {
	fast := accounting.Limit{Name: "per-second", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 100, Window: time.Second}
	slow := accounting.Limit{Name: "per-day", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 100, Window: 24 * time.Hour}
	tiny := accounting.Limit{Name: "tiny", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 10, Window: time.Second}
	t.Run("largest retry-after", func(t *testing.T) {
		l := newLimiter(t, memstore.New(memstore.Options{}), fast, slow)
		r, _ := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 100}})
		if !r.Admitted {
			t.Fatal("first request rejected")
		}
		r, _ = l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 1}})
		if r.Admitted || r.Trip.Limit.Name != "per-day" {
			t.Errorf("trip: got %v, want per-day", r.Trip.Limit)
		}
		if r.Trip.RetryAfter <= time.Second {
			t.Errorf("retry-after: got %v, want the day window's", r.Trip.RetryAfter)
		}
	})
	t.Run("never fits wins", func(t *testing.T) {
		l := newLimiter(t, memstore.New(memstore.Options{}), slow, tiny)
		r, _ := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 100}})
		r, _ = l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 50}})
		if r.Admitted || r.Trip.Limit.Name != "tiny" || !r.Trip.NeverFits {
			t.Errorf("trip: got %+v, want tiny, never fits", r.Trip)
		}
	})
}

func TestMatchSelectsLimits(t *testing.T) {
	free := limit("free-tpm", accounting.Tokens, 100, "tenant")
	free.Match = map[string]string{"tier": "free"}
	l := newLimiter(t, memstore.New(memstore.Options{}), free)
	paid := accounting.Attributes{{Name: "tenant", Value: "t"}, {Name: "tier", Value: "pro"}}
	r, _ := l.Reserve(t.Context(), accounting.Request{Attributes: paid, Estimate: accounting.Estimate{InputTokens: 1000}})
	if !r.Admitted || r.Dims[accounting.Tokens].Applied {
		t.Errorf("a free-tier limit applied to a pro tenant")
	}
	freeAttrs := accounting.Attributes{{Name: "tenant", Value: "t"}, {Name: "tier", Value: "free"}}
	r, _ = l.Reserve(t.Context(), accounting.Request{Attributes: freeAttrs, Estimate: accounting.Estimate{InputTokens: 1000}})
	if r.Admitted {
		t.Errorf("the free-tier limit did not apply to a free tenant")
	}
}

// flakyStore fails while down is set.
type flakyStore struct {
	accounting.Store
	down    atomic.Bool
	settles atomic.Int32
}

var errDown = errors.New("connection refused")

func (f *flakyStore) Reserve(ctx context.Context, r accounting.ReserveRequest) (accounting.ReserveResult, error) {
	if f.down.Load() {
		return accounting.ReserveResult{}, errDown
	}
	return f.Store.Reserve(ctx, r)
}

func (f *flakyStore) Settle(ctx context.Context, r accounting.SettleRequest) error {
	if f.down.Load() {
		return errDown
	}
	f.settles.Add(1)
	return f.Store.Settle(ctx, r)
}

func TestStoreFailureModes(t *testing.T) {
	closed := limit("tpm", accounting.Tokens, 1000, "tenant")
	open := limit("rpm", accounting.Requests, 1000, "tenant")
	open.OnStoreError = accounting.FailOpen
	store := &flakyStore{Store: memstore.New(memstore.Options{})}
	store.down.Store(true)

	l := newLimiter(t, store, closed, open)
	if _, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant}); !errors.Is(err, accounting.ErrStoreUnavailable) {
		t.Errorf("mixed deny/allow limits with the store down: got %v, want ErrStoreUnavailable", err)
	}
	l = newLimiter(t, store, open)
	r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant})
	if err != nil || !r.Admitted || !r.FailedOpen {
		t.Errorf("fail-open limit with the store down: got %+v %v, want admitted, failed open", r, err)
	}
}

func TestSettleRetriesUntilTheStoreIsBack(t *testing.T) {
	store := &flakyStore{Store: memstore.New(memstore.Options{})}
	l := newLimiter(t, store, limit("tpm", accounting.Tokens, 1000, "tenant"))
	r, _ := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 800}})
	store.down.Store(true)
	if ok, err := r.Settle(t.Context(), accounting.Usage{InputTokens: 100}); !ok || err == nil {
		t.Fatalf("Settle with the store down: got %v %v, want true and the store's error", ok, err)
	}
	time.Sleep(120 * time.Millisecond) // a retry or two fail
	store.down.Store(false)
	deadline := time.Now().Add(2 * time.Second)
	for store.settles.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := store.settles.Load(); n != 1 {
		t.Fatalf("settlements that reached the store: got %d, want 1", n)
	}
	r2, _ := l.Reserve(t.Context(), accounting.Request{Attributes: tenant})
	if got := r2.Dims[accounting.Tokens].Remaining; got != 900 {
		t.Errorf("remaining after the retried settlement: got %d, want 900", got)
	}
}

func TestNewRejectsBadLimits(t *testing.T) {
	tests := []struct {
		name  string
		limit accounting.Limit
	}{
		{"no name", accounting.Limit{Dimension: accounting.Tokens, Limit: 1, Window: time.Minute}},
		{"zero limit", accounting.Limit{Name: "a", Limit: 0, Window: time.Minute}},
		{"short window", accounting.Limit{Name: "a", Limit: 1, Window: time.Millisecond}},
		{"month on a bucket", accounting.Limit{Name: "a", Limit: 1, Algorithm: accounting.TokenBucket, Calendar: accounting.CalendarMonth}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{}), Limits: []accounting.Limit{tt.limit}}); err == nil {
				t.Errorf("accepted %+v", tt.limit)
			}
		})
	}
}

func BenchmarkReserveSettle(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(map[int]string{1: "1limit", 4: "4limits"}[n], func(b *testing.B) {
			limits := []accounting.Limit{
				limit("tpm", accounting.Tokens, 1<<50, "tenant"),
				limit("rpm", accounting.Requests, 1<<50, "tenant"),
				limit("spend", accounting.Cost, 1<<50, "tenant"),
				{Name: "user-tpm", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.SlidingWindow, Limit: 1 << 50, Window: time.Minute},
			}[:n]
			l := newLimiter(b, memstore.New(memstore.Options{}), limits...)
			req := accounting.Request{Attributes: tenant, Model: "cheap", Estimate: accounting.Estimate{InputTokens: 1000, OutputTokens: 4096}}
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r, err := l.Reserve(ctx, req)
					if err != nil || !r.Admitted {
						b.Fatal("rejected")
					}
					_, _ = r.Settle(ctx, accounting.Usage{InputTokens: 900, OutputTokens: 300})
				}
			})
		})
	}
}

// TestExactEstimateOnlyDropsTheRecord settles with usage equal to the
// estimate: no counter changes, but the store still hears of it, to delete
// the reservation's record (which would otherwise stay for RecordTTL).
func TestExactEstimateOnlyDropsTheRecord(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	store := &flakyStore{Store: mem}
	l := newLimiter(t, store, limit("tpm", accounting.Tokens, 1000, "tenant"), limit("rpm", accounting.Requests, 10, "tenant"))
	r, _ := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 100, OutputTokens: 50}})
	if _, records := mem.Len(); records != 1 {
		t.Fatalf("records while in flight: got %d, want 1", records)
	}
	if ok, err := r.Settle(t.Context(), accounting.Usage{InputTokens: 120, OutputTokens: 30}); !ok || err != nil {
		t.Fatalf("Settle: %v %v", ok, err)
	}
	if n := store.settles.Load(); n != 1 {
		t.Errorf("store settlements: got %d, want 1", n)
	}
	if _, records := mem.Len(); records != 0 {
		t.Errorf("records after settling: got %d, want 0", records)
	}
	r2, _ := l.Reserve(t.Context(), accounting.Request{Attributes: tenant})
	if got := r2.Dims[accounting.Tokens].Remaining; got != 850 {
		t.Errorf("tokens remaining: got %d, want 850 (the estimate, unchanged)", got)
	}
}

// gathered returns the value of the metric name in reg (a counter's or a
// gauge's, a histogram's sample count) of the child whose labels include
// every name, value pair in labels; 0 when there is none.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
				}
				if !found {
					continue metric
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}
