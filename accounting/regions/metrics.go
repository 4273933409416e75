package regions

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a Region's Prometheus collectors. Make them once per
// process with [NewMetrics] and pass them to every Region it builds, so
// that a Region rebuilt by a reload counts on. Labels are bounded: a
// counter kept across regions is one per limit of the config. A nil
// *Metrics counts nothing.
type Metrics struct {
	granted     *prometheus.CounterVec // counter
	returned    *prometheus.CounterVec // counter
	reclaimedBy prometheus.Counter
	writtenOff  *prometheus.CounterVec // counter
	ledgerErrs  *prometheus.CounterVec // op: acquire|report
	unspent     *prometheus.GaugeVec   // region, counter
}

// NewMetrics returns the collectors, registered with reg when it is not
// nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		granted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_region_lease_granted_total",
			Help: "Budget the ledger granted this replica's region on a limit kept across regions, in the limit's unit, by counter.",
		}, []string{"counter"}),
		returned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_region_lease_returned_total",
			Help: "Budget this replica gave back to the ledger unused (made unspendable in the region first), in the limit's unit, by counter.",
		}, []string{"counter"}),
		reclaimedBy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tokenwarden_region_lease_reclaimed_total",
			Help: "Budget the ledger took back from regions whose lease lapsed (silent past lease_ttl plus grace), in the limits' units, seen by this replica's ledger calls.",
		}),
		writtenOff: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_region_lease_written_off_total",
			Help: "Budget the ledger wrote off when this replica's region called it as a new incarnation (its store forgot its counters, or two regions share its name): what the superseded incarnation held, never granted again in the window, in the limit's unit, by counter. Any increase is an incident.",
		}, []string{"counter"}),
		ledgerErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_region_ledger_errors_total",
			Help: "Ledger calls that failed or timed out, by operation (acquire, report); the region then spends only what it holds until its lease lapses.",
		}, []string{"op"}),
	}
	m.unspent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tokenwarden_region_lease_unspent",
		Help: "What this replica's region holds of its lease and has not spent, as of the replica's last ledger call, in the limit's unit, by region and counter: budget that other regions cannot have meanwhile.",
	}, []string{"region", "counter"})
	if reg != nil {
		reg.MustRegister(m.granted, m.returned, m.reclaimedBy, m.writtenOff, m.ledgerErrs, m.unspent)
	}
	return m
}

func (m *Metrics) grantedAdd(key string, n int64) {
	if m != nil && n > 0 {
		m.granted.WithLabelValues(key).Add(float64(n))
	}
}

func (m *Metrics) returnedAdd(key string, n int64) {
	if m != nil && n > 0 {
		m.returned.WithLabelValues(key).Add(float64(n))
	}
}

func (m *Metrics) reclaimed(n int64) {
	if m != nil && n > 0 {
		m.reclaimedBy.Add(float64(n))
	}
}

// writtenOffAdd counts a write-off, even of nothing, so that the series
// exists once a region was superseded.
func (m *Metrics) writtenOffAdd(key string, n int64) {
	if m != nil {
		m.writtenOff.WithLabelValues(key).Add(float64(max(n, 0)))
	}
}

func (m *Metrics) setUnspent(region, key string, n int64) {
	if m != nil {
		m.unspent.WithLabelValues(region, key).Set(float64(n))
	}
}

func (m *Metrics) ledgerError(op string) {
	if m != nil {
		m.ledgerErrs.WithLabelValues(op).Inc()
	}
}
