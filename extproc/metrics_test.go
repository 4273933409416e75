package extproc

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// gathered returns the registry's series as "name{label=value,…}" →
// value.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestMetricsCache: the cached children count what WithLabelValues
// would, no series exists before its first use, and values outside the
// fixed sets still count.
func TestMetricsCache(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	for range 3 {
		m.request("openai.chat", "admitted")
		m.tokensEstimated("openai.chat", 10)
		m.tokensActual("openai.chat", 7)
		m.settled(BasisUsage)
	}
	m.request("other", "rejected")
	m.request("openai.chat", "an outcome of tomorrow")
	m.request("an API of tomorrow", "admitted")
	m.settled(Basis("a basis of tomorrow"))
	want := map[string]float64{
		"tokenwarden_requests_total{api=openai.chat,outcome=admitted}":               3,
		"tokenwarden_requests_total{api=other,outcome=rejected}":                     1,
		"tokenwarden_requests_total{api=openai.chat,outcome=an outcome of tomorrow}": 1,
		"tokenwarden_requests_total{api=an API of tomorrow,outcome=admitted}":        1,
		"tokenwarden_tokens_total{api=openai.chat,kind=estimated}":                   30,
		"tokenwarden_tokens_total{api=openai.chat,kind=actual}":                      21,
		"tokenwarden_settlement_basis_total{basis=usage}":                            3,
		"tokenwarden_settlement_basis_total{basis=a basis of tomorrow}":              1,
		// The unlabelled collectors.
		"tokenwarden_streams_open{}": 0, "tokenwarden_panics_total{}": 0, "tokenwarden_decision_seconds{}": 0,
	}
	got := gathered(t, reg)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: got %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s", k)
		}
	}
}
