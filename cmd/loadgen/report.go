package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// report prints the comparison as markdown tables.
func report(w io.Writer, children []*child, minimal, fraction, equalRate float64) {
	fmt.Fprintf(w, "\nClosed loop, each server as fast as the load client goes:\n\n")
	fmt.Fprintf(w, "| server | lifecycles/s | server CPU µs per lifecycle | × noop (per round) | Redis CPU µs per lifecycle | calls a Redis read |\n|---|---|---|---|---|---|\n")
	rows := cpuRows(children, func(c *child) []round { return c.rounds })
	for i, c := range children {
		fmt.Fprintf(w, "| %s | %.0f | %s |\n", c.kind, c.rate, rows[i])
	}
	if equalRate > 0 {
		fmt.Fprintf(w, "\nAt equal load, %.0f lifecycles/s offered to each server (open loop, Poisson arrivals):\n\n", equalRate)
		fmt.Fprintf(w, "| server | done/s | server CPU µs per lifecycle | × noop (per round) | Redis CPU µs per lifecycle | calls a Redis read | arrivals sent late, p99 | dropped |\n|---|---|---|---|---|---|---|---|\n")
		rows := cpuRows(children, func(c *child) []round { return c.equal })
		anyDropped := false
		for i, c := range children {
			var done float64
			var dropped int
			var late []time.Duration
			for _, r := range c.equal {
				done += r.t.rate() / float64(len(c.equal))
				dropped += r.t.dropped
				late = append(late, r.t.late...)
			}
			anyDropped = anyDropped || dropped > 0
			fmt.Fprintf(w, "| %s | %.0f | %s | %v | %d |\n", c.kind, done, rows[i], micro(percentile(late, 99)), dropped)
		}
		if anyDropped {
			fmt.Fprintf(w, "\nA server that dropped arrivals did not keep up with the rate offered: its rounds are not at equal load, and their ratios do not compare.\n")
		}
	}
	for _, c := range children {
		if c.kind != "redis" {
			continue
		}
		var total redisStats
		var n int
		for _, r := range c.rounds {
			total.scriptCalls += r.redis.scriptCalls
			total.scriptUsec += r.redis.scriptUsec
			n += r.t.n()
		}
		fmt.Fprintf(w, "\nRedis scripts (INFO commandstats): tokenwarden %.2f calls per lifecycle, %.1f µs per call; minimal 3-key script %.1f µs per call: %.2f×\n",
			float64(total.scriptCalls)/float64(n), total.usecPerCall(), minimal, total.usecPerCall()/minimal)
	}
	fmt.Fprintf(w, "\nLatency at %.0f%% of each server's throughput (open loop, Poisson arrivals; decision: request body sent → its reply):\n\n", 100*fraction)
	fmt.Fprintf(w, "| server | offered/s | done/s | decision p50 | decision p99 | lifecycle p50 | lifecycle p99 | dropped |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range children {
		l := c.latency
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %v | %v | %v | %v | %d |\n", c.kind, fraction*c.rate, l.rate(),
			micro(percentile(l.decisions, 50)), micro(percentile(l.decisions, 99)),
			micro(percentile(l.totals, 50)), micro(percentile(l.totals, 99)), l.dropped)
	}
}

// span renders the range of vs, "295–302" (one value alone).
func span(vs []float64, format string) string {
	if len(vs) == 0 {
		return ""
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	a, b := fmt.Sprintf(format, lo), fmt.Sprintf(format, hi)
	if a == b {
		return a
	}
	return a + "–" + b
}

func micro(d time.Duration) time.Duration { return d.Round(time.Microsecond) }

// cpuList describes a pin's CPUs for the report's header.
func cpuList(cpus []int) string {
	if len(cpus) == 0 {
		return "any CPU (not pinned)"
	}
	return fmt.Sprintf("CPUs %v", cpus)
}

// cpuRows renders, for each child, the columns its rounds (those of
// which) give: the server's CPU time per lifecycle, its ratio to the
// do-nothing server's in the same round, Redis's CPU time per lifecycle
// and the script calls in each of Redis's reads, joined by " | ".
func cpuRows(children []*child, which func(*child) []round) []string {
	var noop *child
	for _, c := range children {
		if c.kind == "noop" {
			noop = c
		}
	}
	var rows []string
	for _, c := range children {
		var cpus, ratios, redisCPU, perRead []float64
		for i, r := range which(c) {
			cpus = append(cpus, r.cpuPer())
			if noop != nil {
				ratios = append(ratios, r.cpuPer()/which(noop)[i].cpuPer())
			}
			if c.kind == "redis" {
				redisCPU = append(redisCPU, r.redisPer())
				perRead = append(perRead, r.redis.callsPerRead())
			}
		}
		ratio := ""
		if noop != nil {
			ratio = span(ratios, "%.2f×")
		}
		rows = append(rows, span(cpus, "%.0f")+" | "+ratio+" | "+span(redisCPU, "%.0f")+" | "+span(perRead, "%.1f"))
	}
	return rows
}
