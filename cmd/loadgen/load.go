package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// tally collects the outcomes of a run.
type tally struct {
	mu        sync.Mutex
	decisions []time.Duration
	totals    []time.Duration
	statuses  map[int]int // 0: an error
	firstErr  error
	elapsed   time.Duration
	dropped   int // open loop: arrivals not sent, too many in flight
	// late is, open loop, how long after its arrival time each
	// lifecycle started: a client that falls behind sends late, and in
	// bursts, and the load is not the one asked for.
	late []time.Duration
}

func newTally() *tally { return &tally{statuses: map[int]int{}} }

func (t *tally) add(o outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.statuses[o.status]++
	if o.err != nil {
		if t.firstErr == nil {
			t.firstErr = o.err
		}
		return
	}
	if o.decision > 0 {
		t.decisions = append(t.decisions, o.decision)
	}
	t.totals = append(t.totals, o.total)
}

// merge adds u's outcomes to t.
func (t *tally) merge(u *tally) {
	t.decisions = append(t.decisions, u.decisions...)
	t.totals = append(t.totals, u.totals...)
	for s, n := range u.statuses {
		t.statuses[s] += n
	}
	if t.firstErr == nil {
		t.firstErr = u.firstErr
	}
	t.dropped += u.dropped
}

// n is the number of lifecycles completed without error.
func (t *tally) n() int { return len(t.totals) }

func (t *tally) rate() float64 { return float64(t.n()) / t.elapsed.Seconds() }

// statusLine renders the statuses, "200×300 429×2 error×1".
func (t *tally) statusLine() string {
	var parts []string
	for s, c := range t.statuses {
		label := strconv.Itoa(s)
		if s == 0 {
			label = "error"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", label, c))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// percentile returns the p-th percentile of ds, sorting ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds)) * p / 100)
	return ds[min(len(ds)-1, i)]
}

// closedLoop runs workers lifecycles back to back, each starting when
// the last ended, until n have started (n > 0) or for d: the server's
// throughput at that concurrency.
func closedLoop(ctx context.Context, client extprocv3.ExternalProcessorClient, t *traffic, workers, n int, d time.Duration) *tally {
	res := newTally()
	var next atomic.Int64
	var deadline time.Time
	if n <= 0 {
		deadline = time.Now().Add(d)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1)
				if n > 0 && i > int64(n) || n <= 0 && time.Now().After(deadline) {
					return
				}
				res.add(lifecycle(ctx, client, t, int(i)))
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// openLoop starts lifecycles at rate per second for d, at random
// (Poisson) arrival times drawn from seed, whether or not earlier ones
// have finished — as independent clients do — so that latency is
// measured at a known load. An arrival that finds maxInFlight
// lifecycles running is dropped and counted: the server is not keeping
// up.
func openLoop(ctx context.Context, client extprocv3.ExternalProcessorClient, t *traffic, rate float64, d time.Duration, maxInFlight int, seed uint64) *tally {
	res := newTally()
	rng := rand.New(rand.NewPCG(1, seed))
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	at := start
	for i := 0; ctx.Err() == nil; i++ {
		at = at.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if at.Sub(start) >= d {
			break
		}
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		res.late = append(res.late, time.Since(at))
		select {
		case slots <- struct{}{}:
		default:
			res.mu.Lock()
			res.dropped++
			res.mu.Unlock()
			continue
		}
		wg.Go(func() {
			res.add(lifecycle(ctx, client, t, i))
			<-slots
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}
