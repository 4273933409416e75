package accounting_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// errTimeout is a store failure after which the call may have been
// applied, as a timeout that strikes after the store acted.
var errTimeout = fmt.Errorf("%w: i/o timeout", accounting.ErrStoreUnavailable)

// hookStore runs a memstore and lets a test take over its calls.
type hookStore struct {
	*memstore.Store
	reserve func(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error)
	settle  func(ctx context.Context, req accounting.SettleRequest) error
}

func (h *hookStore) Reserve(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
	if h.reserve != nil {
		return h.reserve(ctx, req)
	}
	return h.Store.Reserve(ctx, req)
}

func (h *hookStore) Settle(ctx context.Context, req accounting.SettleRequest) error {
	if h.settle != nil {
		return h.settle(ctx, req)
	}
	return h.Store.Settle(ctx, req)
}

// clock is a store clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// limiterWithMetrics returns a Limiter on store with its own registry.
func limiterWithMetrics(t *testing.T, store accounting.Store, limits ...accounting.Limit) (*accounting.Limiter, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	l, err := accounting.New(accounting.Options{Store: store, Limits: limits, SettleRetry: time.Minute, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return l, reg
}

// closeLimiter closes l, which makes its pending settlements and
// releases try at once, and waits for them.
func closeLimiter(t *testing.T, l *accounting.Limiter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// metric reads the counter name{outcome=label}.
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// remaining returns what is left of lim for tenant, through a Limiter of
// its own (so that it works after the one under test has closed).
func remaining(t *testing.T, store accounting.Store, lim accounting.Limit) int64 {
	t.Helper()
	l := newLimiter(t, store, lim)
	r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant})
	if err != nil || !r.Admitted {
		t.Fatalf("Reserve: admitted %v, err %v", r != nil && r.Admitted, err)
	}
	return r.Dims[lim.Dimension].Remaining
}

// TestTimedOutReservationIsReleased fails reservations the way a timeout
// does, after the store applied them or before they reached it, under
// fail-closed and fail-open limits: the Limiter releases each one, and
// every bit of capacity comes back, exactly once.
func TestTimedOutReservationIsReleased(t *testing.T) {
	tests := []struct {
		name       string
		failOpen   bool
		arriveLate bool // the reservation reaches the store after its release
		outcome    string
	}{
		{"applied/fail-closed", false, false, "released"},
		{"applied/fail-open", true, false, "released"},
		{"arrives after its release/fail-closed", false, true, "not_applied"},
		{"arrives after its release/fail-open", true, true, "not_applied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := limit("tpm", accounting.Tokens, 1000, "tenant")
			if tt.failOpen {
				lim.OnStoreError = accounting.FailOpen
			}
			store := &hookStore{Store: memstore.New(memstore.Options{})}
			var late []accounting.ReserveRequest
			store.reserve = func(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
				if tt.arriveLate {
					late = append(late, req)
				} else if _, err := store.Store.Reserve(ctx, req); err != nil {
					t.Fatal(err)
				}
				return accounting.ReserveResult{}, errTimeout
			}
			l, reg := limiterWithMetrics(t, store, lim)
			r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 800}})
			if tt.failOpen {
				if err != nil || !r.Admitted || !r.FailedOpen {
					t.Fatalf("Reserve: got %+v, %v; want admitted, failed open", r, err)
				}
			} else if !errors.Is(err, accounting.ErrStoreUnavailable) {
				t.Fatalf("Reserve: got %v, want ErrStoreUnavailable", err)
			}
			closeLimiter(t, l)
			if got := metric(t, reg, "tokenwarden_releases_total", tt.outcome); got != 1 {
				t.Errorf("releases %s: got %v, want 1", tt.outcome, got)
			}
			for _, req := range late {
				if _, err := store.Store.Reserve(t.Context(), req); !errors.Is(err, accounting.ErrReleased) {
					t.Errorf("the reservation arriving after its release: got %v, want ErrReleased", err)
				}
			}
			if got := remaining(t, store.Store, lim); got != 1000 {
				t.Errorf("remaining after the release: got %d, want 1000", got)
			}
		})
	}
}

// TestUnappliedReservationIsNotReleased: a failure the store is sure
// changed nothing (no connection, say) needs no release.
func TestUnappliedReservationIsNotReleased(t *testing.T) {
	store := &hookStore{Store: memstore.New(memstore.Options{})}
	store.reserve = func(context.Context, accounting.ReserveRequest) (accounting.ReserveResult, error) {
		return accounting.ReserveResult{}, fmt.Errorf("%w, %w: connection refused", accounting.ErrStoreUnavailable, accounting.ErrNotApplied)
	}
	l, reg := limiterWithMetrics(t, store, limit("tpm", accounting.Tokens, 1000, "tenant"))
	if _, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant}); !errors.Is(err, accounting.ErrStoreUnavailable) {
		t.Fatalf("Reserve: got %v, want ErrStoreUnavailable", err)
	}
	closeLimiter(t, l)
	for _, outcome := range []string{"released", "not_applied", "lost"} {
		if got := metric(t, reg, "tokenwarden_releases_total", outcome); got != 0 {
			t.Errorf("releases %s: got %v, want 0", outcome, got)
		}
	}
	if _, records := store.Len(); records != 0 {
		t.Errorf("records: got %d, want none (no tombstone either)", records)
	}
}

// TestSettlementAnswerLost loses the answer of a settlement that applied:
// the retry finds no record and changes nothing, so the usage is booked
// once.
func TestSettlementAnswerLost(t *testing.T) {
	lim := limit("tpm", accounting.Tokens, 1000, "tenant")
	store := &hookStore{Store: memstore.New(memstore.Options{})}
	var calls int
	store.settle = func(ctx context.Context, req accounting.SettleRequest) error {
		calls++
		err := store.Store.Settle(ctx, req)
		if calls == 1 {
			if err != nil {
				t.Fatal(err)
			}
			return errTimeout
		}
		return err
	}
	l, reg := limiterWithMetrics(t, store, lim)
	r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 800}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := r.Settle(t.Context(), accounting.Usage{InputTokens: 300}); !ok || !errors.Is(err, errTimeout) {
		t.Fatalf("Settle: got %v, %v; want true and the timeout", ok, err)
	}
	closeLimiter(t, l)
	if calls != 2 {
		t.Errorf("settle calls: got %d, want 2", calls)
	}
	if got := metric(t, reg, "tokenwarden_settlements_total", "retried"); got != 1 {
		t.Errorf("settlements retried: got %v, want 1", got)
	}
	if got := remaining(t, store.Store, lim); got != 700 {
		t.Errorf("remaining: got %d, want 700 (300 booked once)", got)
	}
}

// TestSettlementRacesItsRetry delivers a settlement's first attempt after
// its retry (two connections, no ordering): the first to arrive applies,
// the other finds no record.
func TestSettlementRacesItsRetry(t *testing.T) {
	lim := limit("tpm", accounting.Tokens, 1000, "tenant")
	store := &hookStore{Store: memstore.New(memstore.Options{})}
	var held []accounting.SettleRequest
	store.settle = func(ctx context.Context, req accounting.SettleRequest) error {
		if len(held) == 0 {
			held = append(held, req) // still on its way
			return errTimeout
		}
		return store.Store.Settle(ctx, req)
	}
	l, reg := limiterWithMetrics(t, store, lim)
	r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 800}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Settle(t.Context(), accounting.Usage{InputTokens: 900}); !errors.Is(err, errTimeout) {
		t.Fatalf("Settle: got %v, want the timeout", err)
	}
	closeLimiter(t, l)
	if got := metric(t, reg, "tokenwarden_settlements_total", "retried"); got != 1 {
		t.Errorf("settlements retried: got %v, want 1", got)
	}
	if err := store.Store.Settle(t.Context(), held[0]); !errors.Is(err, accounting.ErrNoReservation) {
		t.Errorf("the first attempt arriving last: got %v, want ErrNoReservation", err)
	}
	if got := remaining(t, store.Store, lim); got != 100 {
		t.Errorf("remaining: got %d, want 100 (900 booked once)", got)
	}
}

// TestSettleAfterRecordTTL settles a reservation whose record expired:
// nothing changes, and the Limiter counts it, whether it learns so at
// once or on a retry after a failure that certainly changed nothing.
func TestSettleAfterRecordTTL(t *testing.T) {
	for _, viaRetry := range []bool{false, true} {
		t.Run(fmt.Sprint("retry=", viaRetry), func(t *testing.T) {
			lim := limit("tpm", accounting.Tokens, 1000, "tenant")
			lim.Window = 24 * time.Hour
			c := &clock{now: time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)}
			store := &hookStore{Store: memstore.New(memstore.Options{Now: c.Now})}
			if viaRetry {
				var calls int
				store.settle = func(ctx context.Context, req accounting.SettleRequest) error {
					if calls++; calls == 1 {
						return fmt.Errorf("%w, %w: connection refused", accounting.ErrStoreUnavailable, accounting.ErrNotApplied)
					}
					return store.Store.Settle(ctx, req)
				}
			}
			l, reg := limiterWithMetrics(t, store, lim)
			r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 800}})
			if err != nil {
				t.Fatal(err)
			}
			c.Advance(accounting.RecordTTL + accounting.RecordGrain)
			ok, err := r.Settle(t.Context(), accounting.Usage{InputTokens: 100})
			if !ok || (err != nil) != viaRetry {
				t.Fatalf("Settle: got %v, %v", ok, err)
			}
			closeLimiter(t, l)
			if got := metric(t, reg, "tokenwarden_settlements_total", "no_record"); got != 1 {
				t.Errorf("settlements without a record: got %v, want 1", got)
			}
			if got := remaining(t, store.Store, lim); got != 200 {
				t.Errorf("remaining: got %d, want 200 (the estimate stays charged)", got)
			}
		})
	}
}

// TestCallerLeftIsNoStoreError: a reservation whose caller leaves while
// the store call is under way fails with the caller's context, and is
// released like any call that may have landed, but is not counted as a
// store error (an alert on that metric would otherwise fire on clients
// that hang up); a store that fails under a caller still there is.
func TestCallerLeftIsNoStoreError(t *testing.T) {
	lim := limit("tpm", accounting.Tokens, 1000, "tenant")
	store := &hookStore{Store: memstore.New(memstore.Options{})}
	store.reserve = func(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
		if ctx.Err() != nil {
			return accounting.ReserveResult{}, fmt.Errorf("%w: %w", accounting.ErrStoreUnavailable, ctx.Err())
		}
		return accounting.ReserveResult{}, errTimeout
	}
	l, reg := limiterWithMetrics(t, store, lim)
	defer closeLimiter(t, l)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.Reserve(ctx, accounting.Request{Attributes: tenant}); err == nil {
		t.Fatal("Reserve after the caller left: got no error")
	}
	if got := metric(t, reg, "tokenwarden_store_errors_total", "reserve"); got != 0 {
		t.Errorf("store errors after the caller left: got %v, want 0", got)
	}
	if _, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant}); err == nil {
		t.Fatal("Reserve on a failing store: got no error")
	}
	if got := metric(t, reg, "tokenwarden_store_errors_total", "reserve"); got != 1 {
		t.Errorf("store errors after a store timeout: got %v, want 1", got)
	}
}
