package accounting

import "github.com/prometheus/client_golang/prometheus"

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
	leases       *prometheus.GaugeVec // limit
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_store_errors_total",
			Help: "Store calls that failed or timed out, by operation.",
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
	}
	if reg != nil {
		reg.MustRegister(m.storeErrors, m.settlements, m.releases, m.rejectedBy, m.downgrades, m.shadow, m.pendingRetry, m.leases)
	}
	return m
}
