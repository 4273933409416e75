package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// roundOf is a round of n lifecycles that took cpu of the server's time
// over elapsed, with dropped arrivals dropped and each sent late.
func roundOf(n int, cpu, elapsed, late time.Duration, dropped int) round {
	t := newTally()
	for range n {
		t.totals = append(t.totals, time.Millisecond)
		t.late = append(t.late, late)
	}
	t.elapsed, t.dropped = elapsed, dropped
	return round{t: t, cpu: cpu}
}

// TestReportEqualLoad checks the equal-load table's figures, not only its
// shape: each round's ratio to the do-nothing server's in the same round,
// the rate done, the lateness and the drops, and the warning a drop
// brings.
func TestReportEqualLoad(t *testing.T) {
	for _, tc := range []struct {
		name        string
		dropped     int
		wantMemory  string
		wantWarning bool
	}{
		{"kept up", 0, "| memory | 100 | 110–150 | 1.10×–1.20× |  |  | 300µs | 0 |", false},
		{"dropped", 7, "| memory | 100 | 110–150 | 1.10×–1.20× |  |  | 300µs | 7 |", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noop := &child{kind: "noop", latency: newTally(), equal: []round{
				roundOf(100, 10*time.Millisecond, time.Second, 200*time.Microsecond, 0),
				roundOf(100, 12500*time.Microsecond, time.Second, 200*time.Microsecond, 0),
			}}
			memory := &child{kind: "memory", latency: newTally(), equal: []round{
				roundOf(100, 11*time.Millisecond, time.Second, 300*time.Microsecond, 0),
				roundOf(100, 15*time.Millisecond, time.Second, 300*time.Microsecond, tc.dropped),
			}}
			var out bytes.Buffer
			report(&out, []*child{noop, memory}, 0, 0.5, 100)
			got := out.String()
			if !strings.Contains(got, "| noop | 100 | 100–125 | 1.00× |  |  | 200µs | 0 |") {
				t.Errorf("the do-nothing server's equal-load row is missing or wrong:\n%s", got)
			}
			if !strings.Contains(got, tc.wantMemory) {
				t.Errorf("got report\n%s\nwant the row %q", got, tc.wantMemory)
			}
			if warned := strings.Contains(got, "did not keep up"); warned != tc.wantWarning {
				t.Errorf("warning about dropped arrivals: got %v, want %v\n%s", warned, tc.wantWarning, got)
			}
		})
	}
}
