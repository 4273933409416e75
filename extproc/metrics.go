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
	panics      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tokenwarden_streams_open",
			Help: "ext_proc streams currently open.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_requests_total",
			Help: "Requests by API and outcome (admitted, rejected, unavailable, bad_request, unauthenticated, misconfigured: the filter's processing mode cannot meter it, unmetered: a response began before the request body completed).",
		}, []string{"api", "outcome"}),
		settlements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_settlement_basis_total",
			Help: "Settled requests by what the charge was based on: usage (reported by the provider), estimate (input estimate plus the output observed in a stream without a usage report), reserved (the whole reservation: no response, a cut non-streamed reply, hidden reasoning, background, unreadable encoding), refused (non-2xx upstream reply: no tokens), request (not an LLM API: the request only).",
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
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tokenwarden_panics_total",
			Help: "Streams failed by a panic in their handler (the process stays up; Envoy answers that request with a 500).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.streams, m.requests, m.settlements, m.decision, m.tokens, m.panics)
	}
	return m
}
