package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// BenchmarkScriptCost measures what the Store's calls cost Redis itself,
// against a redis-server it starts, next to a yardstick: the minimal
// all-or-nothing script below, on as many keys as the reservation has
// items. For each limit set it runs, round after round, b.N calls of the
// minimal script (and of a leaner variant), b.N reservations and their b.N
// settlements, each phase with fresh INFO commandstats, and reports each
// phase's usec_per_call (the best round: other processes on the machine
// only ever add to it) and the ratios. cpu-µs is Redis's main-thread CPU
// per call, network I/O included.
//
// The memory sub-benchmark reports what reservations cost Redis beyond
// their counters (used_memory, so allocator and dictionary overhead
// included): per reservation in flight, and per finished lifecycle, with
// how long that stays. avg10m is what one lifecycle holds averaged over
// ten minutes: what it leaves, for as long as that stays (at most the ten
// minutes), plus what it holds in flight, for 30 seconds (a long LLM
// call).
//
//	go test -run '^$' -bench ScriptCost -benchtime 20000x ./accounting/redisstore/
func BenchmarkScriptCost(b *testing.B) {
	srv := redistest.Start(b)
	admin := adminClient(b, srv)
	s := newStore(b, srv, Options{Timeout: testTimeout, PoolSize: 16})
	for _, mix := range costMixes {
		b.Run(mix.name, func(b *testing.B) { scriptCost(b, admin, s, mix.limits) })
	}
	b.Run("zoned3", func(b *testing.B) { scriptCost(b, admin, s, zonedLimits(b)) })
	b.Run("memory", func(b *testing.B) { memoryCost(b, admin, s) })
}

// minimalScript is the yardstick: the least an all-or-nothing charge on
// several counters can do (GET and compare each, then INCRBY and PEXPIRE
// each), with none of the windows, states or records the Store keeps.
var minimalScript = redis.NewScript(`
local limit, amount = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 1, #KEYS do
  if tonumber(redis.call('GET', KEYS[i]) or '0') + amount > limit then return 0 end
end
for i = 1, #KEYS do
  redis.call('INCRBY', KEYS[i], amount)
  redis.call('PEXPIRE', KEYS[i], ARGV[3])
end
return 1
`)

// minimalLeanScript is minimalScript passing INCRBY the amount as it came
// (a string), which spares Redis formatting a Lua number: the cheapest
// form of the yardstick.
var minimalLeanScript = redis.NewScript(`
local limit, amount = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 1, #KEYS do
  if tonumber(redis.call('GET', KEYS[i]) or '0') + amount > limit then return 0 end
end
for i = 1, #KEYS do
  redis.call('INCRBY', KEYS[i], ARGV[2])
  redis.call('PEXPIRE', KEYS[i], ARGV[3])
end
return 1
`)

// costMixes are the limit sets BenchmarkScriptCost reserves on.
var costMixes = []struct {
	name   string
	limits []accounting.Limit
}{
	{"fixed3", []accounting.Limit{
		{Name: "user-tph", Scope: []string{"user"}, Algorithm: accounting.FixedWindow, Limit: 1 << 50, Window: time.Hour},
		{Name: "tenant-tph", Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1 << 50, Window: time.Hour},
		{Name: "tenant-month", Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth, Limit: 1 << 50},
	}},
	{"mixed3", []accounting.Limit{
		{Name: "user-tpm", Scope: []string{"user"}, Algorithm: accounting.SlidingWindow, Limit: 1 << 50, Window: time.Minute},
		{Name: "tenant-tph", Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1 << 50, Window: time.Hour},
		{Name: "global", Algorithm: accounting.TokenBucket, Limit: 1 << 50, Window: time.Minute},
	}},
	{"bench4", benchLimits},
	{"sliding3", []accounting.Limit{
		{Name: "user-tpm", Scope: []string{"user"}, Algorithm: accounting.SlidingWindow, Limit: 1 << 50, Window: time.Minute},
		{Name: "tenant-tpm", Scope: []string{"tenant"}, Algorithm: accounting.SlidingWindow, Limit: 1 << 50, Window: time.Minute},
		{Name: "tenant-tph", Scope: []string{"tenant"}, Algorithm: accounting.SlidingWindow, Limit: 1 << 50, Window: time.Hour},
	}},
	{"bucket3", []accounting.Limit{
		{Name: "user-tpm", Scope: []string{"user"}, Algorithm: accounting.TokenBucket, Limit: 1 << 50, Window: time.Minute},
		{Name: "tenant-tpm", Scope: []string{"tenant"}, Algorithm: accounting.TokenBucket, Limit: 1 << 50, Window: time.Minute},
		{Name: "global", Algorithm: accounting.TokenBucket, Limit: 1 << 50, Window: time.Minute},
	}},
}

// zonedLimits are fixed3 on a team's calendar: days and a month in time
// zones, which take the fast paths as UTC windows do.
func zonedLimits(b testing.TB) []accounting.Limit {
	berlin, err1 := time.LoadLocation("Europe/Berlin")
	newYork, err2 := time.LoadLocation("America/New_York")
	if err1 != nil || err2 != nil {
		b.Fatal("tzdata: ", err1, err2)
	}
	return []accounting.Limit{
		{Name: "user-day", Scope: []string{"user"}, Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarDay, Window: 24 * time.Hour, Limit: 1 << 50, Location: berlin},
		{Name: "tenant-day", Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarDay, Window: 24 * time.Hour, Limit: 1 << 50, Location: berlin},
		{Name: "tenant-month", Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth, Limit: 1 << 50, Location: newYork},
	}
}

// costRounds is how many rounds of phases scriptCost runs.
const costRounds = 5

func scriptCost(b *testing.B, admin *redis.Client, s *Store, limits []accounting.Limit) {
	ctx := context.Background()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	reqs := costRequests(limits)
	minKeys := make([][]string, len(reqs))
	for u := range reqs {
		for i := range limits {
			minKeys[u] = append(minKeys[u], fmt.Sprintf("min:%d:%d", u, i))
		}
	}
	// Load the scripts before measuring.
	for _, script := range []*redis.Script{minimalScript, minimalLeanScript} {
		if err := script.Run(ctx, admin, minKeys[0], 1<<50, 1, 60000).Err(); err != nil {
			b.Fatal(err)
		}
	}
	warm := reqs[0]
	warm.ID = "warm"
	res, err := s.Reserve(ctx, warm)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Settle(ctx, settleFor(warm, res)); err != nil {
		b.Fatal(err)
	}

	best := map[string]cost{}
	keep := func(phase string, c cost) {
		if old, ok := best[phase]; !ok || c.usec < old.usec {
			best[phase] = c
		}
	}
	held := make([]accounting.SettleRequest, b.N)
	for round := range costRounds {
		keep("minimal", measure(b, admin, func(i int) error {
			return minimalScript.Run(ctx, s.client, minKeys[i%len(minKeys)], 1<<50, 1500, 60000).Err()
		}))
		keep("lean", measure(b, admin, func(i int) error {
			return minimalLeanScript.Run(ctx, s.client, minKeys[i%len(minKeys)], 1<<50, 1500, 60000).Err()
		}))
		keep("reserve", measure(b, admin, func(i int) error {
			req := reqs[i%len(reqs)]
			req.ID = fmt.Sprintf("cost-%d-%d", round, i)
			res, err := s.Reserve(ctx, req)
			if err != nil {
				return err
			}
			if !res.Admitted {
				return fmt.Errorf("rejected")
			}
			held[i] = settleFor(req, res)
			return nil
		}))
		keep("settle", measure(b, admin, func(i int) error { return s.Settle(ctx, held[i]) }))
	}
	minimal, lean, reserve, settle := best["minimal"], best["lean"], best["reserve"], best["settle"]
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(minimal.usec, "minimal-µs")
	b.ReportMetric(lean.usec, "lean-µs")
	b.ReportMetric(reserve.usec, "reserve-µs")
	b.ReportMetric(settle.usec, "settle-µs")
	b.ReportMetric(reserve.usec/minimal.usec, "reserve/minimal")
	b.ReportMetric(settle.usec/minimal.usec, "settle/minimal")
	b.ReportMetric(reserve.usec/lean.usec, "reserve/lean")
	b.ReportMetric(settle.usec/lean.usec, "settle/lean")
	b.ReportMetric(reserve.cpu, "reserve-cpu-µs")
	b.ReportMetric(minimal.cpu, "minimal-cpu-µs")
	b.ReportMetric(settle.cpu, "settle-cpu-µs")
}

// costRequests builds one reservation per user on limits.
func costRequests(limits []accounting.Limit) []accounting.ReserveRequest {
	reqs := make([]accounting.ReserveRequest, benchUsers)
	for u := range reqs {
		attrs := accounting.Attributes{{Name: "tenant", Value: fmt.Sprintf("tenant-%d", u%20)}, {Name: "user", Value: fmt.Sprintf("user-%d", u)}}
		for i := range limits {
			reqs[u].Items = append(reqs[u].Items, accounting.ReserveItem{Counter: limits[i].Counter(attrs), Amount: 1500})
		}
	}
	return reqs
}

// settleFor settles req, reserved as res, with 700 less than reserved on
// every item: a refund, as most settlements are.
func settleFor(req accounting.ReserveRequest, res accounting.ReserveResult) accounting.SettleRequest {
	sr := accounting.SettleRequest{ID: req.ID, Items: make([]accounting.SettleItem, len(req.Items))}
	for j, it := range req.Items {
		sr.Items[j] = accounting.SettleItem{Counter: it.Counter, Reserved: it.Amount, Actual: it.Amount - 700, Mark: res.States[j].Mark}
	}
	return sr
}

// cost is what one call of a phase cost Redis.
type cost struct {
	usec float64 // INFO commandstats usec_per_call of the script commands
	cpu  float64 // main-thread CPU (user+sys) per call, µs, I/O included
}

// costWorkers is how many goroutines a phase spreads its calls over.
const costWorkers = 8

// measure resets Redis's statistics, runs op b.N times over costWorkers
// goroutines, and returns what a call cost, from INFO.
func measure(b *testing.B, admin *redis.Client, op func(i int) error) cost {
	b.Helper()
	ctx := context.Background()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0 := infoFloat(b, admin, "cpu", "used_cpu_user_main_thread", "used_cpu_sys_main_thread")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int, costWorkers)
	for range costWorkers {
		wg.Go(func() {
			for i := range next {
				if err := op(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range b.N {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
	cpu := infoFloat(b, admin, "cpu", "used_cpu_user_main_thread", "used_cpu_sys_main_thread") - cpu0
	calls, usec := scriptStats(b, admin)
	if calls == 0 {
		b.Fatal("no script calls counted")
	}
	// The INFO calls of the admin client run on the main thread too; at
	// thousands of calls per phase they are noise.
	return cost{usec: usec / float64(calls), cpu: cpu * 1e6 / float64(calls)}
}

// scriptStats sums the calls and µs of the script commands in INFO
// commandstats (the commands the scripts run inside count separately).
func scriptStats(b *testing.B, admin *redis.Client) (calls int64, usec float64) {
	b.Helper()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall":
		default:
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				n, _ := strconv.ParseInt(v, 10, 64)
				calls += n
			case "usec":
				n, _ := strconv.ParseFloat(v, 64)
				usec += n
			}
		}
	}
	return calls, usec
}

// infoFloat sums the named fields of an INFO section.
func infoFloat(b *testing.B, admin *redis.Client, section string, fields ...string) float64 {
	b.Helper()
	info, err := admin.Info(context.Background(), section).Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		for _, f := range fields {
			if k == f {
				n, _ := strconv.ParseFloat(v, 64)
				sum += n
			}
		}
	}
	return sum
}

// memoryCost measures, with used_memory, what reservations add to Redis
// beyond their counters: while b.N of them are in flight, and once all
// are settled; and how long what is left stays (its PTTL).
func memoryCost(b *testing.B, admin *redis.Client, s *Store) {
	ctx := context.Background()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	reqs := costRequests(costMixes[1].limits)
	counters := map[string]bool{}
	// One lifecycle per user first, so that every counter exists before
	// the baseline.
	for i, req := range reqs {
		req.ID = fmt.Sprint("mem-warm-", i)
		res, err := s.Reserve(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Settle(ctx, settleFor(req, res)); err != nil {
			b.Fatal(err)
		}
		for _, it := range req.Items {
			counters[s.RedisKey(it.Key)] = true
		}
	}
	used := func() float64 { return infoFloat(b, admin, "memory", "used_memory") }
	base := used()
	held := make([]accounting.SettleRequest, b.N)
	for i := range b.N {
		req := reqs[i%len(reqs)]
		req.ID = fmt.Sprintf("%016x-%d", 0x5eed, i) // as long as the Limiter's IDs
		res, err := s.Reserve(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		held[i] = settleFor(req, res)
	}
	inFlight := (used() - base) / float64(b.N)
	for i := range b.N {
		if err := s.Settle(ctx, held[i]); err != nil {
			b.Fatal(err)
		}
	}
	left := (used() - base) / float64(b.N)
	// What stays, and for how long: every key that is not a counter.
	var lefts int
	var ttl time.Duration
	iter := admin.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		if counters[iter.Val()] {
			continue
		}
		lefts++
		ttl += admin.PTTL(ctx, iter.Val()).Val()
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	var stays time.Duration
	if lefts > 0 {
		stays = ttl / time.Duration(lefts)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(inFlight, "inflight-B")
	b.ReportMetric(left, "left-B/lifecycle")
	b.ReportMetric(stays.Seconds(), "left-stays-s")
	b.ReportMetric(max(0, left)*min(stays.Seconds(), 600)/600+max(0, inFlight)*30/600, "avg10m-B/lifecycle")
}
