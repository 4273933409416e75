package accounting_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// shadowCount reads tokenwarden_shadow_decisions_total{limit, outcome}.
func shadowCount(t *testing.T, reg *prometheus.Registry, limit, outcome string) float64 {
	t.Helper()
	return gathered(t, reg, "tokenwarden_shadow_decisions_total", "limit", limit, "outcome", outcome)
}

func shadowNames(r *accounting.Reservation) []string {
	var names []string
	for _, l := range r.ShadowRejected {
		names = append(names, l.Name)
	}
	return names
}

// TestShadowLimit runs a shadow limit beside an enforced one: it counts
// what it would admit, names what it would reject without rejecting it,
// stays out of the headers and out of the trip, and settles like any
// other limit.
func TestShadowLimit(t *testing.T) {
	enforced := limit("tpm", accounting.Tokens, 1000, "tenant")
	shadow := limit("tpm-shadow", accounting.Tokens, 300, "tenant")
	shadow.Mode = accounting.Shadow
	l, reg := limiterWithMetrics(t, memstore.New(memstore.Options{}), enforced, shadow)
	defer closeLimiter(t, l)
	reserve := func(tokens int64) *accounting.Reservation {
		t.Helper()
		r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: tokens}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	first := reserve(200)
	if !first.Admitted || first.ShadowRejected != nil {
		t.Fatalf("200 of 300: got admitted %v, shadow rejected %v; want admitted, none", first.Admitted, shadowNames(first))
	}
	if got := first.Dims[accounting.Tokens].Remaining; got != 800 {
		t.Errorf("remaining in the headers: got %d, want 800 (the enforced limit's; the shadow one's 100 is not shown)", got)
	}
	second := reserve(200)
	if !second.Admitted {
		t.Fatal("rejected by a shadow limit")
	}
	if got := shadowNames(second); len(got) != 1 || got[0] != "tpm-shadow" {
		t.Errorf("shadow rejected: got %v, want [tpm-shadow]", got)
	}
	if got, want := shadowCount(t, reg, "tpm-shadow", "would_admit"), 1.0; got != want {
		t.Errorf("would_admit: got %v, want %v", got, want)
	}
	if got, want := shadowCount(t, reg, "tpm-shadow", "would_reject"), 1.0; got != want {
		t.Errorf("would_reject: got %v, want %v", got, want)
	}

	// The first settles at 50 on both counters; the second, which the
	// shadow limit did not charge, only on the enforced one.
	if _, err := first.Settle(t.Context(), accounting.Usage{InputTokens: 50}); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Settle(t.Context(), accounting.Usage{InputTokens: 50}); err != nil {
		t.Fatal(err)
	}
	if r := reserve(250); r.ShadowRejected != nil {
		t.Errorf("250 with 250 left on the shadow counter: shadow rejected %v, want none", shadowNames(r))
	}

	// 700 is over what the enforced limit has left (650), and can never
	// fit the shadow one: the trip still names the enforced limit.
	r := reserve(700)
	if r.Admitted {
		t.Fatal("admitted over the enforced limit")
	}
	if r.Trip.Limit.Name != "tpm" {
		t.Errorf("trip: got %q, want tpm", r.Trip.Limit.Name)
	}
	if got, want := shadowCount(t, reg, "tpm-shadow", "would_reject"), 1.0; got != want {
		t.Errorf("would_reject after an enforced rejection: got %v, want %v (not a shadow decision)", got, want)
	}
}

// TestShadowLimitStoreError checks that a shadow limit, fail-closed as
// token limits are by default, never fails a request when the store
// does: only the enforced limits' on_store_error decides.
func TestShadowLimitStoreError(t *testing.T) {
	shadow := limit("tpm-shadow", accounting.Tokens, 300, "tenant")
	shadow.Mode = accounting.Shadow
	open := limit("rpm", accounting.Requests, 1000, "tenant")
	open.OnStoreError = accounting.FailOpen
	store := &flakyStore{Store: memstore.New(memstore.Options{})}
	store.down.Store(true)

	for _, limits := range [][]accounting.Limit{{shadow}, {shadow, open}} {
		l, reg := limiterWithMetrics(t, store, limits...)
		r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Estimate: accounting.Estimate{InputTokens: 10}})
		if err != nil || !r.Admitted {
			t.Errorf("%d limits, store down: got %v, want admitted", len(limits), err)
		}
		if got := shadowCount(t, reg, "tpm-shadow", "store_error"); got != 1 {
			t.Errorf("%d limits: store_error: got %v, want 1", len(limits), got)
		}
		closeLimiter(t, l)
	}
}
