package extproc

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

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
	implausible *prometheus.CounterVec // api

	// The children of the vectors for the label values of the route
	// table, found once: WithLabelValues hashes its labels and takes the
	// vector's lock on every call, several times per request, from every
	// stream at once. Each is created on first use, so /metrics shows
	// the same series as without the cache.
	apiIndex  map[string]int // API name → index; "other" is 0
	byOutcome [][len(outcomes)]lazyCounter
	estimated []lazyCounter
	actual    []lazyCounter
	byBasis   [len(bases)]lazyCounter
}

// outcomes are the outcome label values of tokenwarden_requests_total:
// the limiter's (accounting.Outcome) and the server's own refusals. It is
// the one count of admission outcomes; the limiter keeps none.
var outcomes = [...]string{"admitted", "failed_open", "rejected", "never_fits", "run_over", "downgraded", "cancelled", "unavailable", "bad_request", "unauthenticated", "misconfigured", "unmetered", "passed", "refused", "bytes_rejected", "bytes_unavailable"}

// bases are the basis label values of tokenwarden_settlement_basis_total.
var bases = [...]Basis{BasisUsage, BasisEstimate, BasisReserved, BasisRefused, BasisRequest}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tokenwarden_streams_open",
			Help: "ext_proc streams currently open.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_requests_total",
			Help: "Requests by API and outcome: admitted, failed_open (admitted unreserved: the store failed and every limit allows that), rejected (429), never_fits (429: larger than a limit's capacity), run_over (429: an agent run's lifetime budget is spent), downgraded (admitted on the fallback model a refusing limit names, after its wait if it has one), cancelled (the client left while its request waited for capacity), unavailable (503: the store failed under a deny limit), bad_request, unauthenticated, misconfigured (the filter's processing mode cannot meter it), unmetered (a response began before the request body completed), passed (not an LLM API path, passed untouched: no identity asked, nothing reserved), refused (403: a call of an unmetered API family the config does not allow, see unmetered_apis), bytes_rejected (429 at the headers: the body does not fit its principal's share of the request bytes in flight), bytes_unavailable (503 at the headers: the replica holds its whole budget of request bytes in flight).",
		}, []string{"api", "outcome"}),
		settlements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_settlement_basis_total",
			Help: "Settled requests by what the charge was based on: usage (reported by the provider), estimate (input estimate plus the output observed in a stream without a usage report), reserved (the whole reservation: no response, none of its body seen, a cut non-streamed reply, hidden reasoning, background, unreadable encoding), refused (non-2xx upstream reply: no tokens), request (not an LLM API: the request only).",
		}, []string{"basis"}),
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tokenwarden_decision_seconds",
			Help:    "Time the limiter takes to decide a request (the store round trip included; parsing and estimating the body are not, nor is a wait for capacity, which tokenwarden_wait_seconds has).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_tokens_total",
			Help: "Tokens by API: estimated at admission, and actual at settlement.",
		}, []string{"api", "kind"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tokenwarden_panics_total",
			Help: "Streams failed by a panic in their handler (the process stays up; Envoy answers that request with a 500).",
		}),
		implausible: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_implausible_usage_total",
			Help: "Usage reports beyond what their request could have produced (input past the model's context window, output past the cap it was sent), charged at that bound.",
		}, []string{"api"}),
		apiIndex: map[string]int{"other": 0},
	}
	for _, r := range routes {
		m.addAPI(r.api.Name())
	}
	for _, api := range azureAPIs {
		m.addAPI(api.Name())
	}
	for i := range families {
		m.addAPI(families[i].name)
	}
	n := len(m.apiIndex)
	m.byOutcome = make([][len(outcomes)]lazyCounter, n)
	m.estimated, m.actual = make([]lazyCounter, n), make([]lazyCounter, n)
	if reg != nil {
		reg.MustRegister(m.streams, m.requests, m.settlements, m.decision, m.tokens, m.panics, m.implausible)
	}
	return m
}

func (m *metrics) addAPI(name string) {
	if _, ok := m.apiIndex[name]; !ok {
		m.apiIndex[name] = len(m.apiIndex)
	}
}

// request counts a request of api (an API name, or "other") with
// outcome.
func (m *metrics) request(api, outcome string) {
	if i, ok := m.apiIndex[api]; ok {
		for j := range outcomes {
			if outcomes[j] == outcome {
				m.byOutcome[i][j].get(m.requests, api, outcome).Inc()
				return
			}
		}
	}
	m.requests.WithLabelValues(api, outcome).Inc()
}

// tokensEstimated and tokensActual count an API's tokens.
func (m *metrics) tokensEstimated(api string, n int64) {
	m.tokensOf(m.estimated, api, "estimated").Add(float64(n))
}
func (m *metrics) tokensActual(api string, n int64) {
	m.tokensOf(m.actual, api, "actual").Add(float64(n))
}

func (m *metrics) tokensOf(cache []lazyCounter, api, kind string) prometheus.Counter {
	if i, ok := m.apiIndex[api]; ok {
		return cache[i].get(m.tokens, api, kind)
	}
	return m.tokens.WithLabelValues(api, kind)
}

// settled counts a settlement on basis.
func (m *metrics) settled(basis Basis) {
	for i := range bases {
		if bases[i] == basis {
			m.byBasis[i].get(m.settlements, string(basis)).Inc()
			return
		}
	}
	m.settlements.WithLabelValues(string(basis)).Inc()
}

// lazyCounter is a child of a counter vector, found on first use. Two
// streams that miss at once both look it up and find the same child.
type lazyCounter struct {
	c atomic.Pointer[prometheus.Counter]
}

func (l *lazyCounter) get(vec *prometheus.CounterVec, labels ...string) prometheus.Counter {
	if c := l.c.Load(); c != nil {
		return *c
	}
	c := vec.WithLabelValues(labels...)
	l.c.Store(&c)
	return c
}
