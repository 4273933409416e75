package redisstore

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// BenchmarkScriptInstructions is BenchmarkScriptCost counted rather than
// timed: it runs a redis-server of its own under callgrind and reports
// the instructions Redis executes per call inside its command dispatch
// (the inclusive cost of Redis's call(), which is what usec_per_call
// times: the function or script with every command it runs, but not the
// reading and parsing of the request) for b.N reservations, their b.N
// settlements and b.N calls of the minimal script, with the ratios.
// Unlike time, the counts do not move with the load on the machine, so
// they are the figures to compare changes of the library by. Calls are
// made one at a time; sliding windows are stretched to a day, so that
// the slow calls under callgrind stay in one slot, as the fast calls of
// BenchmarkScriptCost nearly all do. Skipped unless valgrind, its
// callgrind_control and callgrind_annotate are on PATH.
//
//	go test -run '^$' -bench ScriptInstructions -benchtime 1000x ./accounting/redisstore/
func BenchmarkScriptInstructions(b *testing.B) {
	for _, tool := range []string{"valgrind", "callgrind_control", "callgrind_annotate", "redis-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s is not on PATH", tool)
		}
	}
	cg := startCallgrind(b)
	admin := redis.NewClient(&redis.Options{Addr: cg.addr})
	b.Cleanup(func() { _ = admin.Close() })
	s, err := New(Options{URL: "redis://" + cg.addr, Timeout: time.Minute, PoolSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	for _, mix := range costMixes {
		b.Run(mix.name, func(b *testing.B) { instructions(b, cg, admin, s, daySlots(mix.limits)) })
	}
	b.Run("zoned3", func(b *testing.B) { instructions(b, cg, admin, s, zonedLimits(b)) })
	sliding := costMixes[3]
	if sliding.name != "sliding3" {
		b.Fatalf("costMixes[3] is %s, want sliding3", sliding.name)
	}
	b.Run("sliding3-newslot", func(b *testing.B) { slotInstructions(b, cg, admin, s, sliding.limits, false) })
	b.Run("sliding3-olderslot", func(b *testing.B) { slotInstructions(b, cg, admin, s, sliding.limits, true) })
}

// slotInstructions counts, on sliding windows, the calls that find a
// window moved on: with older, the settlements of reservations made one
// slot before the newest (a request that outlasted its slot while
// others moved the window on); otherwise the reservations that are
// their counters' first in a new slot. The store's clock is frozen for
// it, so these calls read no TIME (about 8k instructions less than the
// other sub-benchmarks' calls).
func slotInstructions(b *testing.B, cg *callgrind, admin *redis.Client, s *Store, limits []accounting.Limit, older bool) {
	ctx := context.Background()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	s.frozen.Store(time.Now().UnixMicro())
	defer s.frozen.Store(0)
	c := limits[0].Counter(nil)
	slot := time.Duration(accounting.SlotLength(&c)) * time.Microsecond
	reqs := costRequests(limits)
	minKeys := make([][]string, len(reqs))
	for u := range reqs {
		for i := range limits {
			minKeys[u] = append(minKeys[u], fmt.Sprintf("min:%d:%d", u, i))
		}
	}
	reserve := func(round string) []accounting.SettleRequest {
		held := make([]accounting.SettleRequest, b.N)
		for i := range b.N {
			req := reqs[i%len(reqs)]
			req.ID = fmt.Sprintf("%016x-%s%d", 0x5eed, round, i)
			res, err := s.Reserve(ctx, req)
			if err != nil || !res.Admitted {
				b.Fatalf("reserve: admitted %v, err %v", res.Admitted, err)
			}
			held[i] = settleFor(req, res)
		}
		return held
	}
	settle := func(held []accounting.SettleRequest) {
		for i := range held {
			if err := s.Settle(ctx, held[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	minimal := func() {
		for i := range b.N {
			if err := minimalScript.Run(ctx, admin, minKeys[i%len(minKeys)], 1<<50, 1500, 60000).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	settle(reserve("warm"))
	minimal()

	var held []accounting.SettleRequest
	if older {
		held = reserve("booked")
		advance(s, slot)
		later := reserve("later")
		defer settle(later)
	} else {
		advance(s, slot)
	}
	cg.zero(b)
	var r float64
	if !older {
		held = reserve("count")
		r = cg.dump(b, "reserve") / float64(b.N)
	}
	settle(held)
	st := cg.dump(b, "settle") / float64(b.N)
	minimal()
	m := cg.dump(b, "minimal") / float64(b.N)
	b.ReportMetric(0, "ns/op")
	if !older {
		b.ReportMetric(r/1000, "reserve-kinstr")
		b.ReportMetric(r/m, "reserve/minimal")
	}
	b.ReportMetric(st/1000, "settle-kinstr")
	b.ReportMetric(m/1000, "minimal-kinstr")
	b.ReportMetric(st/m, "settle/minimal")
}

// daySlots returns limits with every sliding window a day long.
func daySlots(limits []accounting.Limit) []accounting.Limit {
	out := append([]accounting.Limit(nil), limits...)
	for i := range out {
		if out[i].Algorithm == accounting.SlidingWindow {
			out[i].Window = 24 * time.Hour
		}
	}
	return out
}

func instructions(b *testing.B, cg *callgrind, admin *redis.Client, s *Store, limits []accounting.Limit) {
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
	held := make([]accounting.SettleRequest, b.N)
	reserve := func(round string) {
		for i := range b.N {
			req := reqs[i%len(reqs)]
			req.ID = fmt.Sprintf("%016x-%s%d", 0x5eed, round, i)
			res, err := s.Reserve(ctx, req)
			if err != nil || !res.Admitted {
				b.Fatalf("reserve: admitted %v, err %v", res.Admitted, err)
			}
			held[i] = settleFor(req, res)
		}
	}
	settle := func() {
		for i := range b.N {
			if err := s.Settle(ctx, held[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	minimal := func() {
		for i := range b.N {
			if err := minimalScript.Run(ctx, admin, minKeys[i%len(minKeys)], 1<<50, 1500, 60000).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	// A round that creates every key and loads the library and script.
	reserve("warm")
	settle()
	minimal()

	cg.zero(b)
	reserve("count")
	r := cg.dump(b, "reserve") / float64(b.N)
	settle()
	st := cg.dump(b, "settle") / float64(b.N)
	minimal()
	m := cg.dump(b, "minimal") / float64(b.N)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r/1000, "reserve-kinstr")
	b.ReportMetric(st/1000, "settle-kinstr")
	b.ReportMetric(m/1000, "minimal-kinstr")
	b.ReportMetric(r/m, "reserve/minimal")
	b.ReportMetric(st/m, "settle/minimal")
}

// callgrind is a redis-server running under callgrind.
type callgrind struct {
	addr, dir string
	pid       string
	dumps     int
}

func startCallgrind(b *testing.B) *callgrind {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir := b.TempDir()
	cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+filepath.Join(dir, "cg.out"),
		"redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	cg := &callgrind{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, pid: strconv.Itoa(cmd.Process.Pid)}
	c := redis.NewClient(&redis.Options{Addr: cg.addr})
	defer c.Close()
	for deadline := time.Now().Add(time.Minute); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			b.Fatal("redis-server under callgrind did not answer within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cg
}

// zero resets the counts.
func (cg *callgrind) zero(b *testing.B) {
	if out, err := exec.Command("callgrind_control", "-z", cg.pid).CombinedOutput(); err != nil {
		b.Fatalf("callgrind_control -z: %v: %s", err, out)
	}
}

// callInclusive finds Redis's call() in callgrind_annotate's inclusive
// listing (its first line is the outer call, its nested calls being
// call'2).
var callInclusive = regexp.MustCompile(`(?m)^\s*([\d,]+) .*:call \[`)

// dump writes the counts since the last zero or dump, resets them, and
// returns the instructions executed inside call().
func (cg *callgrind) dump(b *testing.B, phase string) float64 {
	if out, err := exec.Command("callgrind_control", "-d", phase, cg.pid).CombinedOutput(); err != nil {
		b.Fatalf("callgrind_control -d: %v: %s", err, out)
	}
	cg.dumps++
	file := filepath.Join(cg.dir, fmt.Sprintf("cg.out.%d", cg.dumps))
	if _, err := os.Stat(file); err != nil {
		b.Fatalf("callgrind dump %s: %v", phase, err)
	}
	out, err := exec.Command("callgrind_annotate", "--inclusive=yes", "--threshold=100", file).Output()
	if err != nil {
		b.Fatalf("callgrind_annotate: %v", err)
	}
	m := callInclusive.FindSubmatch(out)
	if m == nil {
		b.Fatalf("no call() in callgrind_annotate's output of the %s dump", phase)
	}
	n, err := strconv.ParseFloat(strings.ReplaceAll(string(m[1]), ",", ""), 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
