package accounting_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// TestDecisionOutcome: each way Reserve decides has its own outcome.
func TestDecisionOutcome(t *testing.T) {
	failOpen := limit("rpm", accounting.Requests, 10, "tenant")
	failOpen.OnStoreError = accounting.FailOpen
	run := limit("run-tokens", accounting.Tokens, 1000, "tenant")
	run.Algorithm, run.Window = accounting.Lifetime, time.Hour // the window is the run's time cap
	tests := []struct {
		name   string
		limit  accounting.Limit
		down   bool
		tokens int64
		want   accounting.Outcome
	}{
		{"fits", limit("tpm", accounting.Tokens, 1000, "tenant"), false, 100, accounting.OutcomeAdmitted},
		{"no limit applies", limit("tpm", accounting.Tokens, 1000, "user"), false, 100, accounting.OutcomeAdmitted},
		{"too little left", limit("tpm", accounting.Tokens, 1000, "tenant"), false, 600, accounting.OutcomeRejected},
		{"larger than the limit", limit("tpm", accounting.Tokens, 1000, "tenant"), false, 2000, accounting.OutcomeNeverFits},
		{"store down, fail open", failOpen, true, 100, accounting.OutcomeFailedOpen},
		{"run budget spent", run, false, 600, accounting.OutcomeRunOver},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &flakyStore{Store: memstore.New(memstore.Options{})}
			l := newLimiter(t, store, tt.limit)
			req := accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: tt.tokens}}
			if tt.want == accounting.OutcomeRejected || tt.want == accounting.OutcomeRunOver {
				// Spend most of the limit first: settled, so that nothing
				// in flight may give any of it back.
				r, err := l.Reserve(t.Context(), req)
				if err != nil || !r.Admitted {
					t.Fatalf("first reservation: %v", err)
				}
				if _, err := r.Settle(t.Context(), accounting.Usage{InputTokens: tt.tokens}); err != nil {
					t.Fatal(err)
				}
			}
			store.down.Store(tt.down)
			r, err := l.Reserve(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Outcome(); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestLimiterCountsNoDecisions: the Limiter's caller counts decisions
// (extproc's tokenwarden_requests_total); the Limiter registers no
// second count of them.
func TestLimiterCountsNoDecisions(t *testing.T) {
	reg := prometheus.NewRegistry()
	l, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{}),
		Limits: []accounting.Limit{limit("tpm", accounting.Tokens, 1000, "tenant")}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 600}}); err != nil {
			t.Fatal(err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		switch f.GetName() {
		case "tokenwarden_rejections_total":
			found = true
			if n := f.GetMetric()[0].GetCounter().GetValue(); n != 2 {
				t.Errorf("rejections by limit: got %v, want 2", n)
			}
		case "tokenwarden_decisions_total":
			t.Errorf("the limiter exports %s, a second count of its caller's outcomes", f.GetName())
		}
	}
	if !found {
		t.Error("no tokenwarden_rejections_total: the limiter's own metrics are not registered")
	}
}
