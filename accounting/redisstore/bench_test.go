package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// The benchmarks run decisions against a redis-server on loopback that
// they start themselves, serially and with 16 goroutines (comparable to
// redis-benchmark -c 16), and report decisions per second and the p50/p99
// latency of one call besides ns/op and allocations.
//
//	go test -run '^$' -bench . -benchmem ./accounting/redisstore/

// benchUsers is how many distinct callers the benchmarks spread over, so
// that they measure many keys rather than one hot key.
const benchUsers = 1000

// benchLimits are the limits of BenchmarkReserve4Limits: one of each
// algorithm, scoped like a real configuration. None ever trips.
var benchLimits = []accounting.Limit{
	{Name: "user-tpm", Scope: []string{"user"}, Algorithm: accounting.SlidingWindow, Limit: 1 << 50, Window: time.Minute},
	{Name: "tenant-tph", Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1 << 50, Window: time.Hour},
	{Name: "tenant-month", Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth, Limit: 1 << 50},
	{Name: "global", Algorithm: accounting.TokenBucket, Limit: 1 << 50, Window: time.Minute},
}

// benchRequests builds one reservation per user on the first n limits.
func benchRequests(n int) []accounting.ReserveRequest {
	reqs := make([]accounting.ReserveRequest, benchUsers)
	for u := range reqs {
		attrs := accounting.Attributes{{Name: "tenant", Value: fmt.Sprintf("tenant-%d", u%20)}, {Name: "user", Value: fmt.Sprintf("user-%d", u)}}
		for i := range n {
			reqs[u].Items = append(reqs[u].Items, accounting.ReserveItem{Counter: benchLimits[i].Counter(attrs), Amount: 1500})
		}
		reqs[u].ID = fmt.Sprintf("bench-%d", u)
	}
	return reqs
}

func BenchmarkReserve1Limit(b *testing.B)  { benchDecisions(b, 1, false) }
func BenchmarkReserve4Limits(b *testing.B) { benchDecisions(b, 4, false) }

// BenchmarkReserveSettle measures a whole request's store traffic: a
// reservation on four limits and its settlement (two script calls).
func BenchmarkReserveSettle(b *testing.B) { benchDecisions(b, 4, true) }

func benchDecisions(b *testing.B, limits int, settle bool) {
	srv := redistest.Start(b)
	s := newStore(b, srv, Options{Timeout: testTimeout, PoolSize: 32})
	reqs := benchRequests(limits)
	ctx := context.Background()

	op := func(i int) {
		req := reqs[i%len(reqs)]
		if settle {
			// Its own record, which the settlement deletes.
			req.ID = fmt.Sprintf("%s-%d", req.ID, i)
		}
		res, err := s.Reserve(ctx, req)
		if err != nil || !res.Admitted {
			b.Fatalf("Reserve: admitted %v, err %v", res.Admitted, err)
		}
		if !settle {
			return
		}
		sr := accounting.SettleRequest{ID: req.ID, Items: make([]accounting.SettleItem, len(req.Items))}
		for j, it := range req.Items {
			sr.Items[j] = accounting.SettleItem{Counter: it.Counter, Reserved: it.Amount, Actual: it.Amount - 700, Mark: res.States[j].Mark}
		}
		if err := s.Settle(ctx, sr); err != nil {
			b.Fatalf("Settle: %v", err)
		}
	}
	op(0) // load the scripts

	b.Run("serial", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			start := time.Now()
			op(i)
			lat = append(lat, time.Since(start))
		}
		reportLatency(b, lat)
	})
	b.Run("parallel16", func(b *testing.B) {
		var mu sync.Mutex
		var lat []time.Duration
		var seq int
		b.SetParallelism((16 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			mu.Lock()
			seq++
			i := seq * 7919
			mu.Unlock()
			local := make([]time.Duration, 0, 1024)
			for pb.Next() {
				start := time.Now()
				op(i)
				local = append(local, time.Since(start))
				i++
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		})
		reportLatency(b, lat)
	})
}

// reportLatency reports decisions/s over the timed part of the benchmark
// and the median and 99th percentile of the per-call latencies.
func reportLatency(b *testing.B, lat []time.Duration) {
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*50/100])/1e3, "p50-µs")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)])/1e3, "p99-µs")
}
