package extproc_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
)

func withRegistry(reg *prometheus.Registry) rigOption {
	return func(o *extproc.Options, a *accounting.Options) { o.Registerer, a.Registerer = reg, reg }
}

// TestRequestsCountEveryOutcome: tokenwarden_requests_total is the one
// count of admission outcomes, the limiter's included: a request that
// never fits and one admitted unreserved are told apart from a plain
// rejection and a plain admission, each counted once.
func TestRequestsCountEveryOutcome(t *testing.T) {
	small := []byte(`{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
	huge := []byte(`{"model":"gpt-4o-mini","max_tokens":5000,"messages":[{"role":"user","content":"hi"}]}`)
	rpm := accounting.Limit{Name: "tenant-rpm", Dimension: accounting.Requests, Scope: []string{"tenant"},
		Limit: 10, Window: time.Minute, OnStoreError: accounting.FailOpen}
	tests := []struct {
		name   string
		limits []accounting.Limit
		store  accounting.Store
		bodies [][]byte
		want   map[string]float64 // outcome → count
	}{
		{"admitted, then rejected", []accounting.Limit{tokensLimit("tenant-tokens", 200, "tenant")}, nil,
			[][]byte{small, small}, map[string]float64{"admitted": 1, "rejected": 1}},
		{"never fits", []accounting.Limit{tokensLimit("tenant-tokens", 200, "tenant")}, nil,
			[][]byte{huge}, map[string]float64{"never_fits": 1}},
		{"failed open", []accounting.Limit{rpm}, failingStore{},
			[][]byte{small}, map[string]float64{"failed_open": 1}},
		{"store down under a deny limit", []accounting.Limit{tokensLimit("tenant-tokens", 200, "tenant")}, failingStore{},
			[][]byte{small}, map[string]float64{"unavailable": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			opts := []rigOption{withRegistry(reg)}
			if tt.store != nil {
				opts = append(opts, withStore(tt.store))
			}
			r := newRig(t, tt.limits, opts...)
			for _, b := range tt.bodies {
				r.envoy.Do(t.Context(), chatRequest("a", b), jsonUpstream(200, fixture(t, "openai/chat_response.json")))
			}
			r.envoy.Wait()
			var total float64
			for _, outcome := range []string{"admitted", "failed_open", "rejected", "never_fits", "unavailable"} {
				got := requestsTotal(t, reg, outcome)
				total += got
				if got != tt.want[outcome] {
					t.Errorf("outcome %s: got %v, want %v", outcome, got, tt.want[outcome])
				}
			}
			if total != float64(len(tt.bodies)) {
				t.Errorf("requests counted: got %v, want %d, each once", total, len(tt.bodies))
			}
		})
	}
}

// requestsTotal returns tokenwarden_requests_total{api="openai.chat",
// outcome} in reg (zero when absent).
func requestsTotal(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := 0.0
	for _, f := range families {
		if f.GetName() == "tokenwarden_decisions_total" {
			t.Errorf("%s is exported beside tokenwarden_requests_total", f.GetName())
		}
		if f.GetName() != "tokenwarden_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["api"] == "openai.chat" && labels["outcome"] == outcome {
				v = m.GetCounter().GetValue()
			}
		}
	}
	return v
}
