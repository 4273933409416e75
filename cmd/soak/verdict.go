package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
)

// result is one check of the verdict.
type result struct {
	name   string
	ok     bool
	judged bool // false: too little data to judge; neither pass nor fail
	detail string
}

func (r result) status() string {
	switch {
	case !r.judged:
		return "not judged"
	case r.ok:
		return "pass"
	default:
		return "FAIL"
	}
}

// Tolerances of the flatness checks, beside -flat's percentage. A
// constant term keeps a small, idle-ish process from failing on noise: a
// heap in use of 8 MiB moves by more than 10% between two GC cycles, and
// the goroutines move with the requests in flight (a few per stream).
const (
	heapSlack      = 2 * mib
	goroutineSlack = 25
	// idleGoroutineSlack is how far above its idle level, measured
	// after the ramp, tokenwarden's goroutines may be once the traffic
	// has ended and every stream is closed: Envoy's two workers keep
	// their HTTP/2 connections to tokenwarden (made during the ramp), so
	// the level is the same; a few goroutines of timers and the store's
	// pool may come and go.
	idleGoroutineSlack = 5
)

// flatness judges whether a series taken at even intervals under steady
// load is flat: the median of its last third must not exceed the median
// of its second third by more than pct percent plus slack. The first
// third is left out: it holds the warm-up (pools filling, the GC finding
// its pace). A leak grows with the requests served, and so with time
// under a steady rate: it raises every sample after it, so each third's
// median sits above the one before, and a third of a 30-minute soak is
// ten minutes of growth to see. A median rather than a mean because a
// stall (the store slow for a second, the machine busy with something
// else) piles requests up in flight and lifts the one sample taken
// during it several times over: a mean would take that spike for growth,
// a median sees the level. It needs three samples.
func flatness(name string, xs []float64, pct, slack float64, unit func(float64) string) result {
	r := result{name: name}
	if len(xs) < 3 {
		r.detail = fmt.Sprintf("%d samples; needs 3", len(xs))
		return r
	}
	n := len(xs) / 3
	second, last := median(xs[n:len(xs)-n]), median(xs[len(xs)-n:])
	limit := second*(1+pct/100) + slack
	r.judged, r.ok = true, last <= limit
	r.detail = fmt.Sprintf("last third's median %s, second third's %s: limit %s (+%.0f%% +%s)",
		unit(last), unit(second), unit(limit), pct, unit(slack))
	return r
}

// median returns the median of xs (the mean of the middle two when
// there is an even number).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// counts is what the verdict reads off tokenwarden's /metrics and Redis
// once the traffic has ended and every stream is closed.
type counts struct {
	admitted   float64 // tokenwarden_requests_total{outcome=admitted|downgraded}: reservations made
	failedOpen float64 // admitted without a reservation
	settled    float64 // tokenwarden_settlement_basis_total: settlements made
	storeOK    float64 // tokenwarden_settlements_total{outcome=ok|retried}: applied at the store
	storeBad   float64 // settlements no_record or lost, releases lost
	pending    float64 // tokenwarden_settlements_pending_retry
	leases     float64 // tokenwarden_concurrent_leases
	live       int64   // reservation records in Redis
	tombstones int64
	// released and notApplied are releases of reservations whose
	// Reserve failed without a clear answer (a client that left while
	// it ran, a timeout): each leaves a tombstone for an hour, or
	// refunds what the store had applied.
	released, notApplied float64
	storeErrors          map[string]float64 // by operation
}

func countsOf(m metrics) counts {
	return counts{
		admitted:   m.sum("tokenwarden_requests_total", "outcome", "admitted") + m.sum("tokenwarden_requests_total", "outcome", "downgraded"),
		failedOpen: m.sum("tokenwarden_requests_total", "outcome", "failed_open"),
		settled:    m.sum("tokenwarden_settlement_basis_total"),
		storeOK:    m.sum("tokenwarden_settlements_total", "outcome", "ok") + m.sum("tokenwarden_settlements_total", "outcome", "retried"),
		storeBad: m.sum("tokenwarden_settlements_total", "outcome", "no_record") + m.sum("tokenwarden_settlements_total", "outcome", "lost") +
			m.sum("tokenwarden_releases_total", "outcome", "lost"),
		pending:     m.sum("tokenwarden_settlements_pending_retry"),
		leases:      m.sum("tokenwarden_concurrent_leases"),
		released:    m.sum("tokenwarden_releases_total", "outcome", "released"),
		notApplied:  m.sum("tokenwarden_releases_total", "outcome", "not_applied"),
		storeErrors: m.byLabel("tokenwarden_store_errors_total", "op"),
	}
}

// ledger judges that every admitted request was settled once, at the
// server and at the store, and that nothing is left held.
func ledger(c counts) []result {
	settledOK := c.admitted > 0 && c.settled == c.admitted && c.storeOK == c.admitted && c.storeBad == 0 && c.pending == 0
	return []result{
		{name: "settled = admitted", judged: true, ok: settledOK,
			detail: fmt.Sprintf("admitted %.0f (and %.0f failed open, unreserved); settled %.0f; applied at the store %.0f; "+
				"settlements or releases lost or without a record %.0f; pending retry %.0f",
				c.admitted, c.failedOpen, c.settled, c.storeOK, c.storeBad, c.pending)},
		{name: "no reservation left", judged: true, ok: c.live == 0 && c.leases == 0,
			detail: fmt.Sprintf("live reservation records (%s*) %d; tombstones %d (releases: %.0f refunded, %.0f not applied; store errors: %s); concurrent leases held %.0f",
				redisstore.RecordKeyPrefix, c.live, c.tombstones, c.released, c.notApplied, fmtByLabel(c.storeErrors), c.leases)},
	}
}

// goroutinesBack judges that tokenwarden's goroutines came back to their
// idle level once the traffic ended.
func goroutinesBack(idle, after float64) result {
	return result{name: "goroutines back to idle", judged: true, ok: after <= idle+idleGoroutineSlack,
		detail: fmt.Sprintf("idle before the traffic %.0f, after it %.0f (limit +%d)", idle, after, idleGoroutineSlack)}
}

// redisBack judges that Redis returned to its state before the traffic
// once the counters expired: no more keys than then, but for release
// tombstones (kept an hour on purpose), and used_memory within
// max(1 MiB, 10% of the rise at the peak) of then. Redis's own buffers
// (tokenwarden's pool connections, the allocator) need not shrink to the
// byte, but a counter that never expires would keep the keys up.
func redisBack(before, peak, after redisStats, tombstones int64, expired bool) result {
	rise := peak.usedMemory - before.usedMemory
	allow := max(int64(mib), rise/10)
	ok := expired && after.keys <= before.keys+tombstones && after.usedMemory <= before.usedMemory+allow
	detail := fmt.Sprintf("before: %.2f MiB, %d keys; peak: %.2f MiB, %d keys; after: %.2f MiB, %d keys (allowed: +%.2f MiB, +%d tombstones)",
		float64(before.usedMemory)/mib, before.keys, float64(peak.usedMemory)/mib, peak.keys,
		float64(after.usedMemory)/mib, after.keys, float64(allow)/mib, tombstones)
	if !expired {
		detail += "; the keys had not expired when -drain ran out"
	}
	return result{name: "Redis back to baseline", judged: true, ok: ok, detail: detail}
}

// maxOtherFraction is the share of requests that may end otherwise than
// planned (a transport error, an unplanned status, shed by the client).
const maxOtherFraction = 0.001

// responses judges the responses the clients saw.
func responses(total interval) result {
	n := total.total()
	other := total.counts[classOther]
	r := result{name: "responses as planned", judged: n > 0,
		ok:     n > 0 && float64(other) <= maxOtherFraction*float64(n),
		detail: fmt.Sprintf("%d of %d requests ended otherwise than planned (limit %.1f%%)", other, n, maxOtherFraction*100)}
	if len(total.causes) > 0 {
		byCause := map[string]float64{}
		for k, v := range total.causes {
			byCause[k] = float64(v)
		}
		r.detail += ": " + fmtByLabel(byCause)
	}
	if len(total.errs) > 0 {
		r.detail += "; e.g. " + strings.Join(total.errs, "; ")
	}
	return r
}
