package accounting_test

import (
	"context"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

var onProvider = accounting.Attributes{{Name: "tenant", Value: "t1"}, {Name: "provider", Value: "openai-main"}, {Name: "model", Value: "gpt-4o"}}

func TestProviderLimit(t *testing.T) {
	tests := []struct {
		name string
		lim  accounting.Limit
		want bool
	}{
		{"tokens per provider", limit("p", accounting.Tokens, 10, "provider"), true},
		{"requests per provider and model", limit("p", accounting.Requests, 10, "provider", "model"), true},
		{"cost per provider", limit("p", accounting.Cost, 10, "provider"), false},
		{"concurrent per provider", accounting.Limit{Name: "p", Dimension: accounting.Concurrent, Scope: []string{"provider"}}, false},
		{"tokens per tenant", limit("p", accounting.Tokens, 10, "tenant"), false},
		{"matched to a provider, not scoped by it", accounting.Limit{Name: "p", Dimension: accounting.Tokens,
			Match: map[string]string{"provider": "x"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.lim.ProviderLimit(); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestProviderLimitPerModel: a provider limit must count one model at a
// time, as the providers' figures do, so that one model's "0 left" never
// corrects the counter of another; the refusal names the scope that fixes
// it.
func TestProviderLimitPerModel(t *testing.T) {
	tests := []struct {
		name string
		lim  accounting.Limit
		want string // the error, "" for none
	}{
		{"per provider", limit("p", accounting.Tokens, 10, "provider"),
			"scope: a provider limit is corrected by the provider's figures and 429s, which are per model: write scope: [provider, model] (or match one model)"},
		{"per provider and tenant", limit("p", accounting.Requests, 10, "provider", "tenant"),
			"scope: a provider limit is corrected by the provider's figures and 429s, which are per model: write scope: [provider, tenant, model] (or match one model)"},
		{"per provider and model", limit("p", accounting.Tokens, 10, "provider", "model"), ""},
		{"per provider, matched to one model", func() accounting.Limit {
			l := limit("p", accounting.Tokens, 10, "provider")
			l.Match = map[string]string{"model": "gpt-4o"}
			return l
		}(), ""},
		{"cost per provider is no provider limit", limit("p", accounting.Cost, 10, "provider"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.lim.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSettleProvider: a provider's remaining figures lower its limits,
// never raise them, on a 429 too; a tenant's limit is left alone. (Its
// 429s block: TestProviderBlock.)
func TestSettleProvider(t *testing.T) {
	tests := []struct {
		name  string
		usage int64
		ps    accounting.ProviderState
		// What each limit has left after the settlement.
		tokensLeft, requestsLeft, tenantLeft int64
		corrected                            float64 // on the tokens limit
	}{
		{"remaining below the counter's", 1000, accounting.ProviderState{HasTokens: true, RemainingTokens: 5000}, 5000, 99, 9000, 4000},
		{"remaining above the counter's is no refund", 1000, accounting.ProviderState{HasTokens: true, RemainingTokens: 9500}, 9000, 99, 9000, 0},
		{"remaining requests", 1000, accounting.ProviderState{HasRequests: true, RemainingRequests: 10}, 9000, 10, 9000, 0},
		{"remaining below after a usage under the estimate", 200, accounting.ProviderState{HasTokens: true, RemainingTokens: 9000}, 9000, 99, 9800, 800},
		{"nothing stated", 1000, accounting.ProviderState{}, 9000, 99, 9000, 0},
		// A 429 for one request too large for the provider's per-minute
		// limit: the figures say what is left, and nothing is blocked.
		{"a 429 with figures is corrected to them", 0, accounting.ProviderState{RateLimited: true,
			HasTokens: true, RemainingTokens: 8000, HasRequests: true, RemainingRequests: 90}, 8000, 90, 10000, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memstore.New(memstore.Options{})
			tpm := limit("provider-tpm", accounting.Tokens, 10000, "provider", "model")
			rpm := limit("provider-rpm", accounting.Requests, 100, "provider", "model")
			tenantTPM := limit("tenant-tpm", accounting.Tokens, 10000, "tenant")
			l, reg := limiterWithMetrics(t, store, tpm, rpm, tenantTPM)
			r, err := l.Reserve(t.Context(), accounting.Request{Attributes: onProvider, Estimate: accounting.Estimate{InputTokens: 1000}})
			if err != nil || !r.Admitted {
				t.Fatalf("Reserve: admitted %v, err %v", r != nil && r.Admitted, err)
			}
			if !r.HasProviderLimits() {
				t.Fatal("HasProviderLimits: false for a request under provider limits")
			}
			if ok, err := r.SettleProvider(t.Context(), accounting.Usage{InputTokens: tt.usage}, tt.ps); !ok || err != nil {
				t.Fatalf("SettleProvider: %v %v", ok, err)
			}
			for _, c := range []struct {
				lim  accounting.Limit
				want int64
			}{{tpm, tt.tokensLeft}, {rpm, tt.requestsLeft}, {tenantTPM, tt.tenantLeft}} {
				if got := leftOn(t, store, c.lim, onProvider); got != c.want {
					t.Errorf("%s: %d left, want %d", c.lim.Name, got, c.want)
				}
			}
			if got := gathered(t, reg, "tokenwarden_provider_blocked_total", "limit", "provider-tpm"); got != 0 {
				t.Errorf("blocked: got %v, want 0", got)
			}
			if got := gathered(t, reg, "tokenwarden_provider_corrected_total", "limit", "provider-tpm"); got != tt.corrected {
				t.Errorf("corrected: got %v, want %v", got, tt.corrected)
			}
		})
	}
}

// TestSettleProviderStoreFailure: a correction whose store call fails
// is retried with its settlement and lands when the store is back; one
// the store never takes is given up with it, counted as lost. A block is
// not retried: booked later, it would last longer than the provider said.
func TestSettleProviderStoreFailure(t *testing.T) {
	tpm := perMinute("provider-tpm", accounting.Tokens, 10000)
	rpm := perMinute("provider-rpm", accounting.Requests, 100)
	// A 429 that leaves 10 requests and says nothing of tokens: requests
	// corrected, tokens blocked.
	ps := accounting.ProviderState{RateLimited: true, HasRequests: true, RemainingRequests: 10}
	for _, back := range []bool{true, false} {
		name := map[bool]string{true: "store back", false: "store gone"}[back]
		t.Run(name, func(t *testing.T) {
			mem := memstore.New(memstore.Options{})
			store := &flakyStore{Store: mem}
			l, reg := limiterWithMetrics(t, store, tpm, rpm)
			r, err := l.Reserve(t.Context(), accounting.Request{Attributes: onProvider, Estimate: accounting.Estimate{InputTokens: 1000}})
			if err != nil || !r.Admitted {
				t.Fatalf("Reserve: admitted %v, err %v", r != nil && r.Admitted, err)
			}
			store.down.Store(true)
			if ok, err := r.SettleProvider(t.Context(), accounting.Usage{}, ps); !ok || err == nil {
				t.Fatalf("SettleProvider with the store down: got %v %v, want true and the store's error", ok, err)
			}
			store.down.Store(!back)
			closeLimiter(t, l) // the pending settlement tries once more, now
			// Settled without the block, corrected to the figure.
			tokensLeft, requestsLeft, outcome := int64(10000), int64(10), "retried"
			if !back {
				// The reservation's estimate stays charged; the
				// correction is lost with it.
				tokensLeft, requestsLeft, outcome = 9000, 99, "lost"
			}
			if got := leftOn(t, mem, tpm, onProvider); got != tokensLeft {
				t.Errorf("tokens left: got %d, want %d", got, tokensLeft)
			}
			if got := leftOn(t, mem, rpm, onProvider); got != requestsLeft {
				t.Errorf("requests left: got %d, want %d", got, requestsLeft)
			}
			if got := metric(t, reg, "tokenwarden_settlements_total", outcome); got != 1 {
				t.Errorf("settlements %s: got %v, want 1", outcome, got)
			}
		})
	}
}

// perMinute is a provider limit over a sliding minute, per account and
// model.
func perMinute(name string, d accounting.Dimension, n int64) accounting.Limit {
	return accounting.Limit{Name: name, Dimension: d, Scope: []string{"provider", "model"},
		Algorithm: accounting.SlidingWindow, Limit: n, Window: time.Minute}
}

// leftOn returns what lim's counter for attrs has left, asking the store
// for nothing.
func leftOn(t *testing.T, store accounting.Store, lim accounting.Limit, attrs accounting.Attributes) int64 {
	t.Helper()
	res, err := store.Reserve(context.Background(), accounting.ReserveRequest{ID: "probe",
		Items: []accounting.ReserveItem{{Counter: lim.Counter(attrs), Amount: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.States[0].Remaining
}

// TestSettleProviderShadow: a shadow provider limit is corrected like an
// enforced one, so that it reports what blocking would have done, and
// blocks nothing.
func TestSettleProviderShadow(t *testing.T) {
	store := memstore.New(memstore.Options{})
	tpm := perMinute("provider-tpm", accounting.Tokens, 10000)
	tpm.Mode = accounting.Shadow
	l, reg := limiterWithMetrics(t, store, tpm)
	req := accounting.Request{Attributes: onProvider, Estimate: accounting.Estimate{InputTokens: 1000}}
	r, err := l.Reserve(t.Context(), req)
	if err != nil || !r.Admitted {
		t.Fatalf("Reserve: admitted %v, err %v", r != nil && r.Admitted, err)
	}
	if _, err := r.SettleProvider(t.Context(), accounting.Usage{}, accounting.ProviderState{RateLimited: true}); err != nil {
		t.Fatal(err)
	}
	r, err = l.Reserve(t.Context(), req)
	if err != nil || !r.Admitted {
		t.Fatalf("after the provider's 429, a shadow limit refused: admitted %v, err %v", r != nil && r.Admitted, err)
	}
	if got := gathered(t, reg, "tokenwarden_shadow_decisions_total", "limit", "provider-tpm", "outcome", "would_reject"); got != 1 {
		t.Errorf("shadow would_reject: got %v, want 1", got)
	}
}
