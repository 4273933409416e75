package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tokenwarden/tokenwarden/internal/localrun"
)

// report is what a soak found.
type report struct {
	rows    []row
	results []result
}

// passed reports whether every judged check passed.
func (r *report) passed() bool {
	for _, c := range r.results {
		if c.judged && !c.ok {
			return false
		}
	}
	return true
}

// result returns the check called name.
func (r *report) result(name string) (result, bool) {
	for _, c := range r.results {
		if c.name == name {
			return c, true
		}
	}
	return result{}, false
}

// settleTimeout bounds how long the streams may take to close after the
// traffic: the slowest request is a second long.
const settleTimeout = 30 * time.Second

// run is the whole program: main only adds signals and the exit code. The
// report goes to stdout as markdown, progress to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (*report, error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return nil, err
	}
	root, err := localrun.FindRoot()
	if err != nil {
		return nil, err
	}
	shipped, err := os.ReadFile(filepath.Join(root, envoyConfig))
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(filepath.Join(root, signingKey))
	if err != nil {
		return nil, err
	}
	prov, err := loadProvider(shipped, key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envoyConfig, err)
	}
	who, err := newCallers(prov, o.tenants)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tokenwarden-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	st, err := startStack(ctx, root, dir, o, stderr)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			st.stop()
		}
	}()
	redisBefore, err := readRedis(ctx, st.rdb)
	if err != nil {
		return nil, err
	}
	loadStart, _ := loadAverage()
	cl := newClient(st.listen)
	rep := &report{}

	fmt.Fprintf(stdout, "## Soak\n\n")
	fmt.Fprintf(stdout, "Envoy (shipped envoy.yaml, 2 workers) → tokenwarden (Redis store, the limits below) → fakellm; %d tenants (%d hot, %d%% of the requests), %d users each; %s.\n\n",
		o.tenants, hotTenants, hotShare, usersPerTenant, mixText)
	fmt.Fprintf(stdout, "Limits, window %s: %s (tokens per tenant, fixed window, out of reach), %s (hot tenants' tokens, sliding window, 500), %s (requests per user, sliding window, out of reach), %s (all requests, fixed window, out of reach), %s (8 in flight per tenant).\n\n",
		shortDuration(o.window), limitTenantTokens, limitHotTokens, limitUserRequests, limitGlobal, limitConcurrent)

	rate := o.rate
	if rate == 0 {
		fmt.Fprintf(stderr, "soak: ramp, %v a step\n", o.rampStep)
		steps, best, err := ramp(ctx, cl, who, o.rampStep, o.maxConc)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "### Maximum load\n\nClosed loop, each level for %v; responses a second, 429s included:\n\n", o.rampStep)
		fmt.Fprintln(stdout, "| clients | req/s | p50 ms | p99 ms | other |\n|---:|---:|---:|---:|---:|")
		for _, s := range steps {
			fmt.Fprintf(stdout, "| %d | %.0f | %.1f | %.1f | %d |\n", s.conc, s.rps, msOf(s.p50), msOf(s.p99), s.other)
		}
		rate = best / 2
		fmt.Fprintf(stdout, "\nMaximum: %.0f req/s; the soak offers half: %.0f req/s, open loop.\n\n", best, rate)
	} else {
		// Envoy's workers open their connections to tokenwarden with
		// their first requests: a short closed loop opens them, so that
		// the idle level below counts their goroutines, as it does after
		// a ramp, and the check after the traffic compares like with like.
		fmt.Fprintf(stderr, "soak: warm-up, %v\n", o.rampStep)
		if _, _, err := ramp(ctx, cl, who, o.rampStep, warmUpClients); err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "The soak offers %.0f req/s (-rate), open loop; no ramp, a %v warm-up at %d clients.\n\n", rate, o.rampStep, warmUpClients)
	}
	// The idle level of tokenwarden's goroutines, with Envoy's
	// connections made by the ramp or the warm-up.
	m, err := st.settle(ctx, settleTimeout)
	if err != nil {
		return nil, err
	}
	idleGoroutines := m.sum("go_goroutines")
	beforeTraffic := countsOf(m)

	fmt.Fprintf(stdout, "### Every %s\n\n%s\n", shortDuration(o.every), tableHeader)
	var t tally
	tctx, stopTraffic := context.WithTimeout(ctx, o.duration)
	var wg sync.WaitGroup
	wg.Go(func() { openLoop(tctx, cl, who, rate, &t) })
	start, last := time.Now(), time.Now()
	var total interval
	peak := redisBefore
	ticker := time.NewTicker(o.every)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			stopTraffic()
			wg.Wait()
			return nil, ctx.Err()
		case <-tctx.Done():
			done = true
		case <-ticker.C:
		}
		now := time.Now()
		if done && now.Sub(last) < o.every/2 {
			break // the last tick was the end: no stub of a row
		}
		iv := t.take()
		total.add(iv)
		r, err := takeRow(ctx, st, now.Sub(start), now.Sub(last), iv)
		if err != nil {
			stopTraffic()
			wg.Wait()
			return nil, err
		}
		last = now
		rep.rows = append(rep.rows, r)
		peak.usedMemory = max(peak.usedMemory, r.redis.usedMemory)
		peak.keys = max(peak.keys, r.redis.keys)
		fmt.Fprintln(stdout, r)
	}
	ticker.Stop()
	stopTraffic()
	wg.Wait()
	total.add(t.take()) // the requests that ended after the last row

	if o.pprofDir != "" {
		if err := saveProfiles(st.twAdmin, o.pprofDir); err != nil {
			fmt.Fprintf(stderr, "soak: profiles: %v\n", err)
		}
	}
	m, err = st.settle(ctx, settleTimeout)
	if err != nil {
		return nil, err
	}
	c := countsOf(m)
	if c.live, c.tombstones, err = records(ctx, st.rdb); err != nil {
		return nil, err
	}
	afterGoroutines := m.sum("go_goroutines")
	rejections := m.byLabel("tokenwarden_rejections_total", "limit")

	// Redis: wait for the counters to expire.
	fmt.Fprintf(stderr, "soak: traffic over; waiting up to %v for Redis's counters to expire\n", o.drain)
	drainStart := time.Now()
	var redisAfter redisStats
	expired := false
	for {
		if redisAfter, err = readRedis(ctx, st.rdb); err != nil {
			return nil, err
		}
		if redisAfter.keys <= redisBefore.keys+c.tombstones {
			expired = true
			break
		}
		if time.Since(drainStart) > o.drain {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	drained := time.Since(drainStart)
	loadEnd, _ := loadAverage()

	var heaps, gors []float64
	for _, r := range rep.rows {
		heaps, gors = append(heaps, r.heap), append(gors, r.goroutines)
	}
	rep.results = append(rep.results,
		flatness("heap flat", heaps, o.flatPct, heapSlack, func(x float64) string { return fmt.Sprintf("%.2f MiB", x/mib) }),
		flatness("goroutines flat", gors, o.flatPct, goroutineSlack, func(x float64) string { return fmt.Sprintf("%.0f", x) }),
		goroutinesBack(idleGoroutines, afterGoroutines),
	)
	rep.results = append(rep.results, ledger(c)...)
	rep.results = append(rep.results, redisBack(redisBefore, peak, redisAfter, c.tombstones, expired), responses(total))

	stopped = true
	stopErr := st.stop()

	fmt.Fprintf(stdout, "\nTotals: %d requests: %d ok, %d 429, %d upstream 5xx, %d cancelled mid-stream, %d other; p50 %.1f ms, p99 %.1f ms.\n",
		total.total(), total.counts[classOK], total.counts[classLimited], total.counts[class5xx], total.counts[classCancelled],
		total.counts[classOther], msOf(total.percentile(50)), msOf(total.percentile(99)))
	fmt.Fprintf(stdout, "429s by limit (tokenwarden_rejections_total, ramp included): %s.\n", fmtByLabel(rejections))
	fmt.Fprintf(stdout, "Of the ramp (before the soak's traffic): %.0f admitted, releases %.0f refunded and %.0f not applied, store errors %s.\n",
		beforeTraffic.admitted, beforeTraffic.released, beforeTraffic.notApplied, fmtByLabel(beforeTraffic.storeErrors))
	mid := loadStart
	if len(rep.rows) > 0 {
		mid = rep.rows[len(rep.rows)/2].load
	}
	fmt.Fprintf(stdout, "Load average (1, 5, 15 min): start %s, middle %s, end %s.\n", strings.Join(loadStart[:], " "),
		strings.Join(mid[:], " "), strings.Join(loadEnd[:], " "))
	if expired {
		fmt.Fprintf(stdout, "Redis keys back to the level before the traffic %v after it ended.\n", drained.Round(time.Second))
	} else {
		fmt.Fprintf(stdout, "Redis keys not back to the level before the traffic %v after it ended (-drain).\n", drained.Round(time.Second))
	}
	fmt.Fprintf(stdout, "\n### Checks\n\n| check | result | detail |\n|---|---|---|\n")
	for _, r := range rep.results {
		fmt.Fprintf(stdout, "| %s | %s | %s |\n", r.name, r.status(), cell(r.detail))
	}
	if stopErr != nil {
		return rep, fmt.Errorf("stopping: %w", stopErr)
	}
	return rep, nil
}

// shortDuration prints d without a trailing zero unit: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fmtByLabel prints a label → count map, largest first.
func fmtByLabel(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// cell makes text safe in a markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// saveProfiles writes tokenwarden's heap and goroutine profiles (its
// admin_pprof) into dir.
func saveProfiles(adminAddr, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range []struct{ path, file string }{
		{"/debug/pprof/heap", "heap.pb.gz"},
		{"/debug/pprof/goroutine", "goroutine.pb.gz"},
		{"/debug/pprof/goroutine?debug=1", "goroutine.txt"},
	} {
		resp, err := admin.Get("http://" + adminAddr + p.path)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: status %d", p.path, resp.StatusCode)
		}
		if err := os.WriteFile(filepath.Join(dir, p.file), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
