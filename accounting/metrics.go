package accounting

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Limiter's Prometheus collectors: what only the
// limiter sees (store failures, settlements and releases, the limit a
// rejection names). Decisions are its caller's to count (see Outcome).
// Labels are bounded: limit names come from config, never from a
// request.
type metrics struct {
	storeErrors  *prometheus.CounterVec // op: reserve|settle
	settlements  *prometheus.CounterVec // outcome: ok|retried|lost|no_record
	releases     *prometheus.CounterVec // outcome: released|not_applied|lost
	rejectedBy   *prometheus.CounterVec // limit
	downgrades   *prometheus.CounterVec // limit
	shadow       *prometheus.CounterVec // limit, outcome: would_admit|would_reject|store_error
	pendingRetry prometheus.Gauge
	leases       *prometheus.GaugeVec   // limit
	heldForTier  *prometheus.CounterVec // limit

	providerBlocked   *prometheus.CounterVec // limit
	providerCorrected *prometheus.CounterVec // limit

	waited      *prometheus.CounterVec // outcome: see WaitOutcome
	waitSeconds prometheus.Histogram
	waiting     prometheus.Gauge

	limitValues *prometheus.CounterVec // limit, source

	// settledOK is settlements' "ok" child, counted once per request:
	// WithLabelValues hashes the label and takes the vector's lock on
	// every call. Found on first use, so that /metrics shows the same
	// series as without it.
	settledOK atomic.Pointer[prometheus.Counter]
}

// settledFirstTry counts a settlement the store took at the first try.
func (m *metrics) settledFirstTry() {
	c := m.settledOK.Load()
	if c == nil {
		ok := m.settlements.WithLabelValues("ok")
		m.settledOK.Store(&ok)
		c = &ok
	}
	(*c).Inc()
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_store_errors_total",
			Help: "Store calls that failed or timed out, by operation; not a reservation whose caller left while it was under way.",
		}, []string{"op"}),
		settlements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_settlements_total",
			Help: "Settlements by outcome: ok (first try), retried (after a store failure), lost (gave up; the estimate stays charged), no_record (the store no longer held the reservation: older than the record TTL, or lost with the store's data; the estimate stays charged).",
		}, []string{"outcome"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_releases_total",
			Help: "Releases of reservations whose store call failed without a clear answer, by outcome: released (the store had applied it; refunded), not_applied (it had not, and now never will), lost (gave up; if applied, it stays charged until its window passes).",
		}, []string{"outcome"}),
		rejectedBy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_rejections_total",
			Help: "Rejected requests by the limit named in the reply.",
		}, []string{"limit"}),
		downgrades: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_downgrades_total",
			Help: "Requests a limit refused and its on_exhausted.downgrade_to admitted on a fallback model instead, by that limit.",
		}, []string{"limit"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_shadow_decisions_total",
			Help: "Decisions of shadow limits (mode: shadow) on requests the enforced limits admitted, by limit and outcome: would_admit (fitted; charged), would_reject (enforcing the limit would have rejected the request; not charged), store_error (the store call failed; nothing decided).",
		}, []string{"limit", "outcome"}),
		pendingRetry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tokenwarden_settlements_pending_retry",
			Help: "Settlements and releases waiting to be retried after a store failure.",
		}),
		leases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tokenwarden_concurrent_leases",
			Help: "Leases this replica holds on concurrent limits (requests admitted and not yet settled), by limit.",
		}, []string{"limit"}),
		heldForTier: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_reserve_held_total",
			Help: "Requests refused by a limit with reserve_for that the whole limit had room for: the share kept for the privileged tier held them back, by limit.",
		}, []string{"limit"}),
		providerBlocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_provider_blocked_total",
			Help: "Upstream 429s that blocked a provider limit (one scoped by provider) on every replica, for the 429's retry-after, at most a minute, by limit.",
		}, []string{"limit"}),
		providerCorrected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_provider_corrected_total",
			Help: "Requests or tokens (the limit's unit) charged to a provider limit beyond usage because the provider's remaining headers showed less left than the counter, by limit.",
		}, []string{"limit"}),
	}
	m.waited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tokenwarden_waited_total",
		Help: "Requests a limit with on_exhausted.wait_up_to let wait for capacity, by outcome: admitted (capacity returned in time), timed_out (it would not: refused), cancelled (the client left while it waited), queue_full (refused at once: too many waiting), unavailable (the store failed under a deny limit while it waited).",
	}, []string{"outcome"})
	m.waitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "tokenwarden_wait_seconds",
		Help:    "How long requests waited for capacity, whatever the outcome (queue_full excepted: it does not wait).",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2, 3, 5, 10},
	})
	m.waiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tokenwarden_waiting",
		Help: "Requests this replica holds while they wait for capacity.",
	})
	m.limitValues = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tokenwarden_limit_values_total",
		Help: "Values of limits taken from an identity attribute (limit_from), by limit and source: attribute (the attribute's value), absent (no attribute: the limit's own value), invalid (not a usable amount: the limit's own value), ceiling (above the ceiling: the ceiling).",
	}, []string{"limit", "source"})
	if reg != nil {
		reg.MustRegister(m.storeErrors, m.settlements, m.releases, m.rejectedBy, m.downgrades, m.shadow, m.pendingRetry, m.leases, m.heldForTier,
			m.providerBlocked, m.providerCorrected, m.waited, m.waitSeconds, m.waiting, m.limitValues)
	}
	return m
}
