package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "noop" {
		return serveNoop(ctx, args[1:], stderr)
	}
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "127.0.0.1:50051", "ext_proc server `address`")
	conc := fs.Int("c", 16, "concurrent streams")
	total := fs.Int("n", 10000, "requests to send")
	tenants := fs.Int("tenants", 100, "distinct x-tenant-id values")
	scenario := fs.String("scenario", "sse", "response kind: sse or json")
	pid := fs.Int("pid", 0, "server `pid` whose CPU time to measure (0: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *conc < 1 || *total < 1 {
		return errors.New("-c and -n must be positive")
	}
	upstream, err := upstreamFor(*scenario)
	if err != nil {
		return err
	}
	envoy := envoytest.Connect(tb{}, *target)

	// Warm up: connections, the server's pools and caches.
	for i := range min(200, *total) {
		if r := envoy.Do(ctx, request(i%*tenants), upstream); r.Err != nil {
			return fmt.Errorf("warm-up request: %v", r.Err)
		}
	}
	cpu0, err := cpuTime(*pid)
	if err != nil {
		return err
	}
	var next atomic.Int64
	latencies := make([][]time.Duration, *conc)
	statuses := make([]map[int]int, *conc)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range *conc {
		statuses[w] = map[int]int{}
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(*total) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				r := envoy.Do(ctx, request(int(i)%*tenants), upstream)
				latencies[w] = append(latencies[w], time.Since(t0))
				if r.Err != nil {
					statuses[w][-1]++
				} else {
					statuses[w][r.Status]++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := cpuTime(*pid)
	if err != nil {
		return err
	}

	var all []time.Duration
	counts := map[int]int{}
	for w := range *conc {
		all = append(all, latencies[w]...)
		for s, n := range statuses[w] {
			counts[s] += n
		}
	}
	slices.Sort(all)
	n := len(all)
	fmt.Fprintf(stdout, "requests %d in %v: %.0f req/s; latency p50 %v p99 %v\n",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), pct(all, 50), pct(all, 99))
	var parts []string
	for s, c := range counts {
		label := strconv.Itoa(s)
		if s == -1 {
			label = "error"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", label, c))
	}
	slices.Sort(parts)
	fmt.Fprintf(stdout, "statuses: %s\n", strings.Join(parts, " "))
	if *pid != 0 {
		used := cpu1 - cpu0
		fmt.Fprintf(stdout, "server cpu %v: %.1f µs per request\n", used.Round(time.Millisecond), float64(used.Microseconds())/float64(n))
	}
	return nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)].Round(time.Microsecond)
}

// cpuTime returns a process's user+system CPU time from /proc.
func cpuTime(pid int) (time.Duration, error) {
	if pid == 0 {
		return 0, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start after ")".
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

func serveNoop(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("noop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:50061", "listen `address`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	gs := grpc.NewServer(extproc.GRPCServerOptions()...)
	extprocv3.RegisterExternalProcessorServer(gs, envoytest.Noop{})
	fmt.Fprintf(stderr, "noop ext_proc server on %s (pid %d)\n", lis.Addr(), os.Getpid())
	go func() {
		<-ctx.Done()
		gs.Stop()
	}()
	return gs.Serve(lis)
}

// tb lets the envoytest client run outside a test: its failures end the
// program.
type tb struct{ testing.TB }

func (tb) Helper()                           {}
func (tb) Cleanup(func())                    {}
func (tb) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
