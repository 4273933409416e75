package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/accounting/regions"
	"github.com/tokenwarden/tokenwarden/extproc"
)

// series is a name a PromQL query can select, with the labels it carries.
type series struct {
	family string          // the metric family it belongs to
	labels map[string]bool // its labels, target labels included
}

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance"}

// exported returns every series name the server exports, from its own
// registry: the Limiter's and the Server's collectors, as the binary
// registers them, and the Go and process collectors it adds beside them.
// A vector's series appear only once it has a child, so each vector gets
// one, with placeholder label values, before the registry is gathered.
func exported(t *testing.T) map[string]series {
	t.Helper()
	reg := prometheus.NewRegistry()
	cap := &capturing{reg: reg}
	lim, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{}), Registerer: cap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close(t.Context()) })
	if _, err := extproc.NewServer(extproc.Options{Limiter: lim, Registerer: cap}); err != nil {
		t.Fatal(err)
	}
	// And a region's, when the config has a regions section.
	regions.NewMetrics(cap)
	// cmd/tokenwarden's serve registers these two beside the server's.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// And its config reloader these, which a package main cannot lend
	// this test: its own tests find them, by these names, on /metrics.
	cap.MustRegister(
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tokenwarden_config_reloads_total"}, []string{"outcome"}),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "tokenwarden_config_last_reload_successful"}),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "tokenwarden_config_last_reload_success_timestamp_seconds"}),
		prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tokenwarden_config_info"}, []string{"sha256"}),
	)
	for _, c := range cap.collectors {
		touch(t, c)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]series{}
	for _, f := range families {
		labels := map[string]bool{}
		for _, l := range targetLabels {
			labels[l] = true
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		name := f.GetName()
		add := func(n string, extra ...string) {
			ls := map[string]bool{}
			for k := range labels {
				ls[k] = true
			}
			for _, e := range extra {
				ls[e] = true
			}
			out[n] = series{family: name, labels: ls}
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			add(name+"_bucket", "le")
			add(name + "_sum")
			add(name + "_count")
		case dto.MetricType_SUMMARY:
			add(name, "quantile")
			add(name + "_sum")
			add(name + "_count")
		default:
			add(name)
		}
	}
	// Prometheus's own series for every target.
	out["up"] = series{family: "up", labels: map[string]bool{"job": true, "instance": true}}
	return out
}

// capturing registers collectors into a registry and remembers them.
type capturing struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

func (c *capturing) Register(col prometheus.Collector) error {
	if err := c.reg.Register(col); err != nil {
		return err
	}
	c.collectors = append(c.collectors, col)
	return nil
}

func (c *capturing) MustRegister(cols ...prometheus.Collector) {
	for _, col := range cols {
		if err := c.Register(col); err != nil {
			panic(err)
		}
	}
}

func (c *capturing) Unregister(col prometheus.Collector) bool { return c.reg.Unregister(col) }

// touch gives a vector one child, so that gathering shows its family and
// label names. The vector's label count is found by trying.
func touch(t *testing.T, c prometheus.Collector) {
	t.Helper()
	var vec *prometheus.MetricVec
	switch v := c.(type) {
	case *prometheus.CounterVec:
		vec = v.MetricVec
	case *prometheus.GaugeVec:
		vec = v.MetricVec
	case *prometheus.HistogramVec:
		vec = v.MetricVec
	case *prometheus.SummaryVec:
		vec = v.MetricVec
	default:
		return
	}
	for n := 0; n <= 8; n++ {
		if _, err := vec.GetMetricWithLabelValues(slices.Repeat([]string{"x"}, n)...); err == nil {
			return
		}
	}
	t.Fatalf("a %T with more than 8 labels", c)
}

// labelValueSources are the directories whose Go sources write the label
// values of the server's metrics.
var labelValueSources = []string{"../extproc", "../accounting", "../cmd/tokenwarden"}

// enumeratedLabels are the labels whose values come from fixed sets in the
// code. A query that matches one of them on a value the code never writes
// (outcome="loss") would silently match nothing.
var enumeratedLabels = []string{"outcome", "basis", "kind", "op"}

// serverSources returns the server's Go sources (tests excluded) in one
// string: a label value the code can write appears there as a string
// literal.
func serverSources(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, dir := range labelValueSources {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
	}
	return b.String()
}

// TestExportedMetrics pins the registry build: every metric the docs name
// is found, with its labels.
func TestExportedMetrics(t *testing.T) {
	got := exported(t)
	want := map[string][]string{
		"tokenwarden_requests_total":                               {"api", "outcome"},
		"tokenwarden_rejections_total":                             {"limit"},
		"tokenwarden_decision_seconds_bucket":                      {"le"},
		"tokenwarden_tokens_total":                                 {"api", "kind"},
		"tokenwarden_settlement_basis_total":                       {"basis"},
		"tokenwarden_settlements_total":                            {"outcome"},
		"tokenwarden_settlements_pending_retry":                    nil,
		"tokenwarden_store_errors_total":                           {"op"},
		"tokenwarden_streams_open":                                 nil,
		"tokenwarden_panics_total":                                 nil,
		"tokenwarden_implausible_usage_total":                      {"api"},
		"tokenwarden_config_reloads_total":                         {"outcome"},
		"tokenwarden_config_last_reload_successful":                nil,
		"tokenwarden_config_last_reload_success_timestamp_seconds": nil,
		"tokenwarden_config_info":                                  {"sha256"},
		"tokenwarden_limit_values_total":                           {"limit", "source"},
		"tokenwarden_reserve_held_total":                           {"limit"},
		"tokenwarden_provider_blocked_total":                       {"limit"},
		"tokenwarden_provider_corrected_total":                     {"limit"},
		"tokenwarden_waited_total":                                 {"outcome"},
		"tokenwarden_wait_seconds_bucket":                          {"le"},
		"tokenwarden_waiting":                                      nil,
		"tokenwarden_request_bytes_in_flight":                      nil,
		"tokenwarden_request_bytes_limit":                          {"of"},
		"tokenwarden_request_bytes_refused_total":                  {"reason"},

		"tokenwarden_learned_output_requests_total":         {"estimate"},
		"tokenwarden_learned_output_tokens_total":           {"kind"},
		"tokenwarden_learned_output_overshoot_tokens_total": nil,
		"tokenwarden_learned_output_keys":                   nil,
	}
	for name, labels := range want {
		s, ok := got[name]
		if !ok {
			t.Errorf("%s: not exported", name)
			continue
		}
		for _, l := range labels {
			if !s.labels[l] {
				t.Errorf("%s: no label %s (has %v)", name, l, s.labels)
			}
		}
	}
}
