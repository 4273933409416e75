package extproc

import "github.com/prometheus/client_golang/prometheus"

// metrics are the server's Prometheus collectors. Label values come from
// fixed sets (API kinds from the route table, outcomes below), never from
// a request's identity.
type metrics struct {
	streams     prometheus.Gauge
	requests    *prometheus.CounterVec // api, outcome
	settlements *prometheus.CounterVec // basis: usage|estimate|refused|request
	decision    prometheus.Histogram
	tokens      *prometheus.CounterVec // api, kind: estimated|actual
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tokenwarden_streams_open",
			Help: "ext_proc streams currently open.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_requests_total",
			Help: "Requests by API and outcome (admitted, rejected, unavailable, bad_request, unauthenticated).",
		}, []string{"api", "outcome"}),
		settlements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_settlement_basis_total",
			Help: "Settled requests by what the charge was based on: usage (reported by the provider), estimate (input estimate plus observed output: stream cut or no usage reported), refused (non-2xx upstream reply: no tokens), request (not an LLM API: the request only).",
		}, []string{"basis"}),
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tokenwarden_decision_seconds",
			Help:    "Time to estimate and reserve a request body, store round trip included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_tokens_total",
			Help: "Tokens by API: estimated at admission, and actual at settlement.",
		}, []string{"api", "kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.streams, m.requests, m.settlements, m.decision, m.tokens)
	}
	return m
}
