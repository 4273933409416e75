package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestFlatness(t *testing.T) {
	num := func(x float64) string { return fmt.Sprint(x) }
	cases := []struct {
		name       string
		xs         []float64
		wantJudged bool
		wantOK     bool
	}{
		{"flat", []float64{100, 100, 101, 99, 100, 100}, true, true},
		{"warm-up left out", []float64{10, 20, 100, 100, 100, 100}, true, true},
		{"noise within the slack", []float64{100, 100, 100, 100, 114, 116}, true, true},
		{"a leak", []float64{100, 110, 120, 130, 140, 150}, true, false},
		{"a step up at the end", []float64{100, 100, 100, 100, 100, 200}, true, false},
		{"shrinking", []float64{200, 180, 160, 140, 120, 100}, true, true},
		{"a stall's spike", []float64{100, 100, 100, 100, 100, 100, 100, 500, 100}, true, true},
		{"a leak under spikes", []float64{100, 100, 100, 100, 400, 100, 130, 500, 130}, true, false},
		{"three samples", []float64{100, 100, 100}, true, true},
		{"three samples, the last grown", []float64{100, 100, 200}, true, false},
		{"two samples", []float64{100, 500}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// 10% + 5 of the second third's median.
			r := flatness("x", c.xs, 10, 5, num)
			if r.judged != c.wantJudged || r.ok != c.wantOK {
				t.Errorf("got judged %v ok %v (%s), want judged %v ok %v", r.judged, r.ok, r.detail, c.wantJudged, c.wantOK)
			}
		})
	}
}

func TestLedger(t *testing.T) {
	good := counts{admitted: 100, settled: 100, storeOK: 100}
	cases := []struct {
		name                  string
		change                func(*counts)
		wantSettled, wantLeft bool // ok of "settled = admitted", "no reservation left"
	}{
		{"balanced", func(*counts) {}, true, true},
		{"tombstones are not reservations", func(c *counts) { c.tombstones = 7 }, true, true},
		{"one never settled", func(c *counts) { c.settled = 99; c.storeOK = 99 }, false, true},
		{"one settled twice", func(c *counts) { c.settled = 101 }, false, true},
		{"settled, but not at the store", func(c *counts) { c.storeOK = 98 }, false, true},
		{"a settlement lost", func(c *counts) { c.storeBad = 1 }, false, true},
		{"a settlement pending", func(c *counts) { c.pending = 1 }, false, true},
		{"nothing admitted", func(c *counts) { *c = counts{} }, false, true},
		{"a live record", func(c *counts) { c.live = 1 }, true, false},
		{"a lease held", func(c *counts) { c.leases = 1 }, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := good
			c.change(&in)
			rs := ledger(in)
			if len(rs) != 2 {
				t.Fatalf("got %d results, want 2", len(rs))
			}
			if rs[0].ok != c.wantSettled {
				t.Errorf("settled = admitted: got %v (%s), want %v", rs[0].ok, rs[0].detail, c.wantSettled)
			}
			if rs[1].ok != c.wantLeft {
				t.Errorf("no reservation left: got %v (%s), want %v", rs[1].ok, rs[1].detail, c.wantLeft)
			}
		})
	}
}

func TestGoroutinesBack(t *testing.T) {
	cases := []struct {
		name        string
		idle, after float64
		want        bool
	}{
		{"same", 20, 20, true},
		{"fewer", 20, 18, true},
		{"within the slack", 20, 20 + idleGoroutineSlack, true},
		{"one per stream left", 20, 120, false},
		{"just over", 20, 21 + idleGoroutineSlack, false},
	}
	for _, c := range cases {
		if got := goroutinesBack(c.idle, c.after); got.ok != c.want {
			t.Errorf("%s: got %v (%s), want %v", c.name, got.ok, got.detail, c.want)
		}
	}
}

func TestRedisBack(t *testing.T) {
	before := redisStats{usedMemory: 1 * mib, keys: 0}
	peak := redisStats{usedMemory: 50 * mib, keys: 100000}
	cases := []struct {
		name       string
		after      redisStats
		tombstones int64
		expired    bool
		want       bool
	}{
		{"back", redisStats{usedMemory: 1 * mib}, 0, true, true},
		{"tombstones kept", redisStats{usedMemory: 1 * mib, keys: 3}, 3, true, true},
		{"allocator keeps a little", redisStats{usedMemory: 5 * mib}, 0, true, true},
		{"a key that never expires", redisStats{usedMemory: 1 * mib, keys: 4}, 3, true, false},
		{"memory not returned", redisStats{usedMemory: 20 * mib}, 0, true, false},
		{"drain ran out", redisStats{usedMemory: 1 * mib}, 0, false, false},
	}
	for _, c := range cases {
		if got := redisBack(before, peak, c.after, c.tombstones, c.expired); got.ok != c.want {
			t.Errorf("%s: got %v (%s), want %v", c.name, got.ok, got.detail, c.want)
		}
	}
	// A small soak: the allowance is 1 MiB, not a tenth of a small rise.
	small := redisStats{usedMemory: 2 * mib, keys: 100}
	if got := redisBack(before, small, redisStats{usedMemory: 1*mib + mib/2}, 0, true); !got.ok {
		t.Errorf("half a MiB over after a 1 MiB peak: got fail (%s), want pass", got.detail)
	}
}

func TestResponses(t *testing.T) {
	var iv interval
	iv.counts[classOK] = 10000
	if r := responses(iv); !r.ok {
		t.Errorf("all ok: got fail (%s)", r.detail)
	}
	iv.counts[classOther] = 10
	if r := responses(iv); !r.ok {
		t.Errorf("0.1%% other: got fail (%s)", r.detail)
	}
	var tl tally
	tl.add(classOther, 0, &statusError{what: "openai json", status: 503, body: `{"error":{"code":"limiter_unavailable"}}`})
	tl.add(classOther, 0, &statusError{what: "openai json", status: 500, body: "upstream | reset"})
	tl.add(classOther, 0, errShed)
	iv.add(tl.take())
	r := responses(iv)
	if r.ok {
		t.Errorf("13 of 10013 other: got pass (%s)", r.detail)
	}
	for _, want := range []string{"status 500: upstream | reset", "503 limiter unavailable (store) 1", "status 500 1", "not sent (client at its in-flight bound) 1"} {
		if !strings.Contains(r.detail, want) {
			t.Errorf("detail %q: want %q", r.detail, want)
		}
	}
	if r := responses(interval{}); r.judged {
		t.Errorf("no requests: got judged, want not judged")
	}
}

func TestReportPassed(t *testing.T) {
	cases := []struct {
		name    string
		results []result
		want    bool
	}{
		{"all pass", []result{{judged: true, ok: true}, {judged: true, ok: true}}, true},
		{"one fails", []result{{judged: true, ok: true}, {judged: true, ok: false}}, false},
		{"not judged is no failure", []result{{judged: true, ok: true}, {judged: false}}, true},
	}
	for _, c := range cases {
		if got := (&report{results: c.results}).passed(); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_memstats_heap_inuse_bytes 8.388608e+06
tokenwarden_requests_total{api="openai.chat",outcome="admitted"} 7
tokenwarden_requests_total{api="anthropic.messages",outcome="admitted"} 3
tokenwarden_requests_total{api="openai.chat",outcome="rejected"} 5
tokenwarden_rejections_total{limit="a \"quoted\", name"} 2
tokenwarden_rejections_total{limit="b"} 3
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		got   float64
		wantN float64
	}{
		{"unlabelled", m.sum("go_goroutines"), 42},
		{"exponent", m.sum("go_memstats_heap_inuse_bytes"), 8 << 20},
		{"by label", m.sum("tokenwarden_requests_total", "outcome", "admitted"), 10},
		{"by two labels", m.sum("tokenwarden_requests_total", "api", "openai.chat", "outcome", "admitted"), 7},
		{"all", m.sum("tokenwarden_requests_total"), 15},
		{"absent", m.sum("tokenwarden_nothing"), 0},
		{"escaped label value", m.byLabel("tokenwarden_rejections_total", "limit")[`a \"quoted\", name`], 2},
	}
	for _, c := range cases {
		if c.got != c.wantN {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.wantN)
		}
	}
	if _, err := parseMetrics(strings.NewReader("go_goroutines\n")); err == nil {
		t.Error("a line without a value: got no error")
	}
}

func TestPercentile(t *testing.T) {
	var iv interval
	for i := 1; i <= 100; i++ {
		iv.lat = append(iv.lat, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}} {
		if got := iv.percentile(c.p); got != c.want {
			t.Errorf("p%v: got %v, want %v", c.p, got, c.want)
		}
	}
	if got := (interval{}).percentile(50); got != 0 {
		t.Errorf("no latencies: got %v, want 0", got)
	}
}

func TestShortDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{time.Minute, "1m"}, {20 * time.Second, "20s"}, {90 * time.Second, "1m30s"}, {time.Hour, "1h"}, {time.Hour + time.Minute, "1h1m"}} {
		if got := shortDuration(c.d); got != c.want {
			t.Errorf("%v: got %q, want %q", c.d, got, c.want)
		}
	}
}
