package accounting_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// TestReconfigureSettlesUnderReservedLimits: a reservation made before a
// reconfiguration settles on the limits and prices it was reserved
// under, including a limit the new config leaves out, while new
// reservations see only the new limits.
func TestReconfigureSettlesUnderReservedLimits(t *testing.T) {
	store := memstore.New(memstore.Options{})
	removed := limit("removed-tpm", accounting.Tokens, 10_000, "tenant")
	spend := limit("spend", accounting.Cost, 1_000_000, "tenant")
	kept := limit("kept-rpm", accounting.Requests, 100, "tenant")
	a, err := accounting.New(accounting.Options{Store: store, Limits: []accounting.Limit{removed, spend, kept},
		Prices: accounting.Prices{"default": {Input: 1, Output: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Reserve(t.Context(), accounting.Request{Attributes: tenant, Model: "m", Estimate: accounting.Estimate{InputTokens: 1000, OutputTokens: 1000}})
	if err != nil || !r.Admitted {
		t.Fatalf("Reserve under A: admitted=%v err=%v", r != nil && r.Admitted, err)
	}

	// B drops the token limit and prices the model ten times higher.
	b, err := a.Reconfigure(accounting.Options{Limits: []accounting.Limit{spend, kept},
		Prices: accounting.Prices{"default": {Input: 10, Output: 20}}})
	if err != nil {
		t.Fatalf("Reconfigure: %v", err)
	}
	if got := len(b.Limits()); got != 2 {
		t.Errorf("B's limits: got %d, want 2", got)
	}
	if got := len(a.Limits()); got != 3 {
		t.Errorf("A's limits after Reconfigure: got %d, want 3 (A does not change)", got)
	}
	if b.Store() != a.Store() {
		t.Error("B's store is not A's")
	}

	// Settled after the swap: 100 in, 50 out, at A's prices (1 and 2
	// $/M): 100 + 100 = 200 µ$; the removed limit gets its 150 tokens.
	if ok, err := r.Settle(t.Context(), accounting.Usage{InputTokens: 100, OutputTokens: 50}); !ok || err != nil {
		t.Fatalf("Settle: %v %v", ok, err)
	}
	if got := 10_000 - remaining(t, store, removed); got != 150 {
		t.Errorf("removed limit used after settlement: got %d tokens, want 150", got)
	}
	if got := 1_000_000 - remaining(t, store, spend); got != 200 {
		t.Errorf("spend used after settlement: got %d µ$, want 200 (A's prices)", got)
	}

	// A new reservation on B: the removed limit is not charged, and B's
	// prices apply.
	r2, err := b.Reserve(t.Context(), accounting.Request{Attributes: tenant, Model: "m", Estimate: accounting.Estimate{InputTokens: 1000}})
	if err != nil || !r2.Admitted {
		t.Fatalf("Reserve under B: admitted=%v err=%v", r2 != nil && r2.Admitted, err)
	}
	if r2.Cost != 10_000 {
		t.Errorf("B's estimate cost: got %d µ$, want 10000 (B's prices)", r2.Cost)
	}
	if got := 10_000 - remaining(t, store, removed); got != 150 {
		t.Errorf("removed limit used after a reservation on B: got %d, want still 150", got)
	}
	if r2.ID == r.ID || !strings.HasPrefix(r2.ID, strings.SplitN(r.ID, "-", 2)[0]) {
		t.Errorf("reservation IDs: got %q after %q, want one sequence", r2.ID, r.ID)
	}
}

// TestReconfigureRefuses: what a reconfiguration cannot change, and
// options Validate refuses, are errors; the Limiter is left unchanged.
func TestReconfigureRefuses(t *testing.T) {
	store := memstore.New(memstore.Options{})
	a, err := accounting.New(accounting.Options{Store: store, Limits: []accounting.Limit{limit("rpm", accounting.Requests, 1, "tenant")},
		MaxPendingSettlements: 10})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    accounting.Options
		wantErr string // "" for success
	}{
		{name: "same store, same bound", opts: accounting.Options{Store: store, MaxPendingSettlements: 10}},
		{name: "unset store and bound", opts: accounting.Options{}},
		{name: "other store", opts: accounting.Options{Store: memstore.New(memstore.Options{})}, wantErr: "cannot change the store"},
		{name: "other bound", opts: accounting.Options{MaxPendingSettlements: 11}, wantErr: "MaxPendingSettlements"},
		{name: "invalid limits", opts: accounting.Options{Limits: []accounting.Limit{
			limit("x", accounting.Requests, 1), limit("x", accounting.Requests, 2)}}, wantErr: "limits[1].name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := a.Reconfigure(tt.opts)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got error %v, want none", err)
			case tt.wantErr == "" && b == nil:
				t.Fatal("got no Limiter")
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
			if got := len(a.Limits()); got != 1 {
				t.Errorf("A's limits: got %d, want 1", got)
			}
		})
	}
}

// TestReconfigureSharesBackground: metrics and retrying settlements are
// shared. A settlement of the reconfigured Limiter that failed on the
// store is retried, counted in the original's metrics, and waited for by
// closing the original.
func TestReconfigureSharesBackground(t *testing.T) {
	hs := &hookStore{Store: memstore.New(memstore.Options{})}
	tpm := limit("tpm", accounting.Tokens, 10_000, "tenant")
	a, reg := limiterWithMetrics(t, hs, tpm)
	b, err := a.Reconfigure(accounting.Options{Limits: []accounting.Limit{tpm}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 1000}})
	if err != nil || !r.Admitted {
		t.Fatalf("Reserve: admitted=%v err=%v", r != nil && r.Admitted, err)
	}
	failed := false
	hs.settle = func(ctx context.Context, req accounting.SettleRequest) error {
		if !failed {
			failed = true // the first try only; the retry runs after it returns
			return accounting.ErrNotApplied
		}
		return hs.Store.Settle(ctx, req)
	}
	if _, err := r.Settle(t.Context(), accounting.Usage{InputTokens: 10}); err == nil {
		t.Fatal("Settle: got no error from a failing store")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatalf("closing A: %v", err)
	}
	if got := metric(t, reg, "tokenwarden_settlements_total", "retried"); got != 1 {
		t.Errorf("retried settlements in A's metrics: got %v, want 1", got)
	}
	if got := 10_000 - remaining(t, hs.Store, tpm); got != 10 {
		t.Errorf("used after the retried settlement: got %d, want 10", got)
	}
}
