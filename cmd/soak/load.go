package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// tally counts the responses of one interval and keeps their latencies.
type tally struct {
	mu  sync.Mutex
	cur interval
}

// interval is what a tally counted since it was last taken.
type interval struct {
	counts [numClasses]int64
	// lat are the latencies of the requests that were answered as
	// planned and read to their end (ok, 429, the upstream's 5xx):
	// request sent to body read.
	lat    []time.Duration
	errs   []string         // the first few errors, for the report
	causes map[string]int64 // the class "other" by cause
}

// maxErrSamples bounds the errors an interval keeps.
const maxErrSamples = 5

func (t *tally) add(c class, d time.Duration, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cur.counts[c]++
	if c != classCancelled && c != classOther {
		t.cur.lat = append(t.cur.lat, d)
	}
	if c == classOther {
		if t.cur.causes == nil {
			t.cur.causes = map[string]int64{}
		}
		t.cur.causes[cause(err)]++
		if err != nil && len(t.cur.errs) < maxErrSamples {
			t.cur.errs = append(t.cur.errs, err.Error())
		}
	}
}

// take returns what was counted and starts over.
func (t *tally) take() interval {
	t.mu.Lock()
	defer t.mu.Unlock()
	iv := t.cur
	t.cur = interval{}
	return iv
}

func (iv interval) total() int64 {
	var n int64
	for _, c := range iv.counts {
		n += c
	}
	return n
}

// percentile returns the p-th percentile (0 < p ≤ 100) of the
// latencies, nearest rank; 0 when there are none.
func (iv interval) percentile(p float64) time.Duration {
	if len(iv.lat) == 0 {
		return 0
	}
	s := slices.Clone(iv.lat)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// add folds o into iv (latencies too).
func (iv *interval) add(o interval) {
	for i := range iv.counts {
		iv.counts[i] += o.counts[i]
	}
	iv.lat = append(iv.lat, o.lat...)
	for k, n := range o.causes {
		if iv.causes == nil {
			iv.causes = map[string]int64{}
		}
		iv.causes[k] += n
	}
	for _, e := range o.errs {
		if len(iv.errs) < maxErrSamples {
			iv.errs = append(iv.errs, e)
		}
	}
}

// send sends one request of the mix and counts it.
func send(ctx context.Context, cl *client, who *callers, t *tally) {
	c, d, err := cl.do(ctx, pickKind(), who.pick())
	if ctx.Err() != nil && c == classOther {
		return // the soak is stopping: not the server's doing
	}
	t.add(c, d, err)
}

// rampStep is the throughput at one concurrency level.
type rampStep struct {
	conc     int
	rps      float64
	p50, p99 time.Duration
	other    int64
}

// rampGain is how much a step must beat the best so far to go on.
const rampGain = 1.05

// warmUpClients is the warm-up's one level of closed-loop clients when
// -rate skips the ramp: more than Envoy has workers.
const warmUpClients = 4

// ramp finds the maximum load: closed loop, each level's conc clients
// send one request after another for step, at 4, 8, 16, … up to maxConc
// clients, until a level's throughput (responses a second, 429s
// included) is not rampGain times the best so far. It returns the steps
// and the best throughput.
func ramp(ctx context.Context, cl *client, who *callers, step time.Duration, maxConc int) ([]rampStep, float64, error) {
	var steps []rampStep
	best := 0.0
	for conc := 4; conc <= maxConc; conc *= 2 {
		var t tally
		sctx, cancel := context.WithTimeout(ctx, step)
		var wg sync.WaitGroup
		start := time.Now()
		for range conc {
			wg.Go(func() {
				for sctx.Err() == nil {
					send(sctx, cl, who, &t)
				}
			})
		}
		wg.Wait()
		cancel()
		if ctx.Err() != nil {
			return steps, best, ctx.Err()
		}
		iv := t.take()
		s := rampStep{conc: conc, rps: float64(iv.total()) / time.Since(start).Seconds(),
			p50: iv.percentile(50), p99: iv.percentile(99), other: iv.counts[classOther]}
		steps = append(steps, s)
		if s.rps < best*rampGain {
			break
		}
		best = max(best, s.rps)
	}
	if best == 0 {
		return steps, 0, errors.New("ramp: no request completed")
	}
	return steps, best, nil
}

// maxInFlight bounds the open loop's requests in flight. A request that
// finds it full is counted as "other": the server fell so far behind
// that the soak could not offer its rate.
const maxInFlight = 4096

// errShed is a request the open loop could not send: maxInFlight were.
var errShed = fmt.Errorf("client: %d requests in flight, none sent", maxInFlight)

// openLoop offers rate requests a second, on schedule whether or not the
// earlier ones have been answered, until ctx ends; it returns once every
// request it sent has ended.
func openLoop(ctx context.Context, cl *client, who *callers, rate float64, t *tally) {
	gap := time.Duration(float64(time.Second) / rate)
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := 0; ; i++ {
		next := start.Add(time.Duration(i) * gap)
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				wg.Wait()
				return
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			wg.Wait()
			return
		}
		select {
		case slots <- struct{}{}:
			wg.Go(func() {
				defer func() { <-slots }()
				// The request outlives the schedule: it is
				// answered, not cut, when the traffic stops.
				send(context.WithoutCancel(ctx), cl, who, t)
			})
		default:
			t.add(classOther, 0, errShed)
		}
	}
}
