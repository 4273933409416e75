package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestMain lets the test binary stand in for loadgen when compare starts
// its servers: they run "os.Executable() serve …".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestLoadAgainstNoop runs the noop server and a short load against it,
// measuring the server's (this process's) CPU.
func TestLoadAgainstNoop(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"noop", "-listen", addr}, io.Discard, io.Discard) }()
	defer func() {
		cancel()
		<-done
	}()

	var out bytes.Buffer
	var runErr error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		out.Reset()
		if runErr = run(t.Context(), []string{"-target", addr, "-c", "4", "-n", "300", "-pid", strconv.Itoa(os.Getpid()), "-scenario", "json"}, &out, io.Discard); runErr == nil {
			break
		}
	}
	if runErr != nil {
		t.Fatalf("loadgen: %v", runErr)
	}
	for _, want := range []string{"requests 300 in", "statuses: 200×300", "server cpu"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCompare runs the whole comparison, briefly, with every server:
// each one starts, completes lifecycles with 200s only, and gets its
// rows in the report.
func TestCompare(t *testing.T) {
	rs := redistest.Start(t)
	var out bytes.Buffer
	// 500 ms rounds: under the race detector, beside other packages'
	// tests, the slowest server may complete only a few hundred
	// lifecycles a second, and an equal-load round must offer at least
	// minEqualArrivals.
	err := run(t.Context(), []string{"compare", "-servers", "noop,memory,redis", "-redis", rs.URL(),
		"-c", "4", "-d", "500ms", "-rounds", "2", "-latency-d", "300ms"}, &out, os.Stderr)
	if err != nil {
		t.Fatalf("compare: %v\n%s", err, out.String())
	}
	report := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^round 1: noop \d+/s \d+ µs \| memory \d+/s \d+ µs \| redis \d+/s \d+ µs \+ Redis \d+ µs, [\d.]+ calls a read$`),
		regexp.MustCompile(`(?m)^round 2: `),
		regexp.MustCompile(`(?m)^\| noop \| \d+ \| [\d–]+ \| 1\.00× \|  \|  \|$`),
		regexp.MustCompile(`(?m)^\| memory \| \d+ \| [\d–]+ \| [\d.×–]+ \|  \|  \|$`),
		regexp.MustCompile(`(?m)^\| redis \| \d+ \| [\d–]+ \| [\d.×–]+ \| [\d–]+ \| [\d.–]+ \|$`),
		regexp.MustCompile(`(?m)^equal-load round 1 \(\d+/s offered\): noop \d+/s \d+ µs \| memory \d+/s \d+ µs \| redis \d+/s \d+ µs \+ Redis \d+ µs, [\d.]+ calls a read`),
		regexp.MustCompile(`(?m)^equal-load round 2 `),
		regexp.MustCompile(`(?m)^\| noop \| \d+ \| [\d–]+ \| 1\.00× \|  \|  \| [\dµm.s]+ \| \d+ \|$`),
		regexp.MustCompile(`(?m)^\| redis \| \d+ \| [\d–]+ \| [\d.×–]+ \| [\d–]+ \| [\d.–]+ \| [\dµm.s]+ \| \d+ \|$`),
		// Two calls, a reservation and a settlement, on a quiet machine;
		// on a loaded one calls that timed out or were retried move the
		// figure, so the test checks the report's shape, not the count.
		regexp.MustCompile(`tokenwarden \d\.\d\d calls per lifecycle, [\d.]+ µs per call; minimal 3-key script [\d.]+ µs per call`),
		regexp.MustCompile(`(?m)^\| redis \| \d+ \| \d+ \| [\dµm.s]+ \| [\dµm.s]+ \| [\dµm.s]+ \| [\dµm.s]+ \| \d+ \|$`),
	} {
		if !want.MatchString(report) {
			t.Errorf("report lacks %s:\n%s", want, report)
		}
	}
	// The equal-load rounds offer every server 0.8 of the slowest one's
	// closed-loop throughput.
	closed := regexp.MustCompile(`(?m)^\| (noop|memory|redis) \| (\d+) \| [\d–]+ \| [\d.×–]+ \| [\d–]* \| [\d.–]* \|$`).FindAllStringSubmatch(report, -1)
	if len(closed) != 3 {
		t.Fatalf("closed-loop rows: got %d, want 3:\n%s", len(closed), report)
	}
	slowest := math.Inf(1)
	for _, m := range closed {
		r, _ := strconv.ParseFloat(m[2], 64)
		slowest = min(slowest, r)
	}
	m := regexp.MustCompile(`At equal load, (\d+) lifecycles/s offered`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("report lacks the equal-load rate:\n%s", report)
	}
	if offered, _ := strconv.ParseFloat(m[1], 64); math.Abs(offered-0.8*slowest) > 1 {
		t.Errorf("equal-load rate: got %v, want 0.8 × %v", offered, slowest)
	}
	// Measured, not left at zero: how late arrivals were sent (a sleep
	// overshoots by far more than the microsecond shown), and how many
	// calls came in each of Redis's reads (about one or more; the
	// store's other commands, and INFO, take reads of their own).
	row := regexp.MustCompile(`(?m)^\| redis \| \d+ \| [\d–]+ \| [\d.×–]+ \| [\d–]+ \| ([\d.–]+) \| ([\dµm.s]+) \| \d+ \|$`).FindStringSubmatch(report)
	if row == nil {
		t.Fatalf("report lacks the Redis store's equal-load row:\n%s", report)
	}
	if perRead, _ := strconv.ParseFloat(strings.Split(row[1], "–")[0], 64); perRead < 0.5 {
		t.Errorf("equal-load calls a Redis read: got %s, want at least 0.5", row[1])
	}
	if row[2] == "0s" {
		t.Errorf("equal-load arrivals sent late, p99: got %s, want more than nothing", row[2])
	}
}

// TestEqualLoadTooLow: an equal-load rate that offers a round only a
// handful of lifecycles is refused, naming the flag, rather than
// reported as a measurement of servers that mostly idled.
func TestEqualLoadTooLow(t *testing.T) {
	err := run(t.Context(), []string{"compare", "-servers", "noop", "-c", "2", "-d", "200ms", "-rounds", "1",
		"-latency-d", "100ms", "-equal", "0.000001"}, io.Discard, os.Stderr)
	if err == nil || !strings.Contains(err.Error(), "-equal") {
		t.Errorf("compare -equal 0.000001: got %v, want an error naming -equal", err)
	}
}

func TestFlagsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no streams", []string{"-c", "0"}},
		{"unknown scenario", []string{"-scenario", "grpc"}},
		{"unknown server", []string{"compare", "-servers", "noop,envoy"}},
		{"fraction above one", []string{"compare", "-fraction", "1.5"}},
		{"fraction NaN", []string{"compare", "-fraction", "NaN"}},
		{"equal load above one", []string{"compare", "-equal", "1.2"}},
		{"negative equal load", []string{"compare", "-equal", "-0.5"}},
		{"equal load NaN", []string{"compare", "-equal", "NaN"}},
		{"unknown store", []string{"serve", "-store", "disk"}},
		{"redis without an address", []string{"serve", "-store", "redis"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := run(t.Context(), tc.args, io.Discard, io.Discard); err == nil {
				t.Errorf("run %q: got no error", tc.args)
			}
		})
	}
}

func TestParseInfo(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:0.000000\r\n" +
		"# Stats\r\ntotal_connections_received:4\r\ntotal_reads_processed:44\r\n" +
		"# Commandstats\r\ncmdstat_get:calls=5,usec=10,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=100,usec=3000,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_fcall:calls=10,usec=500,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n"
	got, err := parseInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	want := redisStats{cpu: 3750 * time.Millisecond, scriptCalls: 110, scriptUsec: 3500, reads: 44}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got, want := want.callsPerRead(), 2.5; got != want {
		t.Errorf("calls per read: got %v, want %v", got, want)
	}
	if _, err := parseInfo("# Commandstats\r\n"); err == nil {
		t.Error("INFO without CPU figures: got no error")
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0, 1}, {50, 6}, {90, 10}, {99, 10}, {100, 10}} {
		if got := percentile(ds, tc.p); got != tc.want {
			t.Errorf("p%v: got %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("empty: got %v, want 0", got)
	}
}
