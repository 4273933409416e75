package redisstore

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// BenchmarkCluster measures whole decisions (a reservation and its
// settlement) from 32 goroutines on a three-master Redis Cluster, with
// every key in one slot (hash_tag: one master does all the work) and
// sharded by tenant (shard_by: the tenants spread over three masters), on
// 1,000 tenants. "tenant" reserves two limits scoped by tenant (one call
// each way); "tenant+global" adds a global limit, a second slot (two
// calls each way, and every decision meets the global counter's master).
// Besides decisions/s it reports the Redis CPU time per decision on each
// master (INFO cpu, user+sys), busiest first.
//
//	go test -run '^$' -bench BenchmarkCluster -benchtime 20000x ./accounting/redisstore/
//
// On a machine with fewer cores than masters plus the client, the
// masters compete for the same CPUs and the figure shows what the layout
// costs rather than what it scales to.
func BenchmarkCluster(b *testing.B) {
	cl := redistest.StartCluster(b, 3)
	admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer admin.Close()
	tenantLimits := []accounting.Limit{
		{Name: "tenant-tph", Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1 << 50, Window: time.Hour},
		{Name: "tenant-month", Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth, Limit: 1 << 50},
	}
	global := accounting.Limit{Name: "global", Algorithm: accounting.TokenBucket, Limit: 1 << 50, Window: time.Minute}
	for _, layout := range []struct {
		name string
		opts Options
	}{
		{"hash_tag", Options{HashTag: "tw"}},
		{"shard_by", Options{ShardBy: "tenant"}},
	} {
		for _, w := range []struct {
			name   string
			limits []accounting.Limit
		}{
			{"tenant", tenantLimits},
			{"tenant+global", append(append([]accounting.Limit(nil), tenantLimits...), global)},
		} {
			b.Run(layout.name+"/"+w.name, func(b *testing.B) {
				opts := layout.opts
				opts.ClusterAddrs, opts.Timeout, opts.PoolSize = cl.Addrs(), testTimeout, 32
				s := newStore(b, nil, opts)
				benchClusterDecisions(b, s, admin, w.limits)
			})
		}
	}
}

func benchClusterDecisions(b *testing.B, s *Store, admin *redis.ClusterClient, limits []accounting.Limit) {
	const tenants = 1000
	ctx := context.Background()
	items := make([][]accounting.ReserveItem, tenants)
	for i := range items {
		attrs := accounting.Attributes{{Name: "tenant", Value: fmt.Sprintf("tenant-%d", i)}}
		for j := range limits {
			items[i] = append(items[i], accounting.ReserveItem{Counter: limits[j].Counter(attrs), Amount: 1500})
		}
	}
	var seq atomic.Int64
	op := func() {
		n := seq.Add(1)
		req := accounting.ReserveRequest{ID: "bench-" + strconv.FormatInt(n, 36), Items: items[n%tenants]}
		res, err := s.Reserve(ctx, req)
		if err != nil || !res.Admitted {
			b.Fatalf("Reserve: admitted %v, err %v", res.Admitted, err)
		}
		sr := accounting.SettleRequest{ID: req.ID, Items: make([]accounting.SettleItem, len(req.Items))}
		for j, it := range req.Items {
			sr.Items[j] = accounting.SettleItem{Counter: it.Counter, Reserved: it.Amount, Actual: it.Amount - 700, Mark: res.States[j].Mark}
		}
		if err := s.Settle(ctx, sr); err != nil {
			b.Fatalf("Settle: %v", err)
		}
	}
	for range tenants {
		// Load the library everywhere and create every counter.
		op()
	}
	before := masterCPU(b, admin)
	b.SetParallelism((32 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op()
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	after := masterCPU(b, admin)
	var used []float64
	for addr, t := range after {
		used = append(used, (t-before[addr])/float64(b.N)*1e6)
	}
	slicesSortDesc(used)
	for i, u := range used {
		b.ReportMetric(u, fmt.Sprintf("cpu-µs/decision-m%d", i))
	}
}

// masterCPU reads each master's CPU time (s, user plus sys) from INFO.
func masterCPU(b *testing.B, admin *redis.ClusterClient) map[string]float64 {
	var mu sync.Mutex
	out := map[string]float64{}
	err := admin.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		var sum float64
		for _, line := range strings.Split(info, "\r\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return err
				}
				sum += f
			}
		}
		mu.Lock()
		out[c.Options().Addr] = sum
		mu.Unlock()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func slicesSortDesc(v []float64) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j] > v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
}
