package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "compare":
			return compare(ctx, args[1:], stdout, stderr)
		case "serve":
			return serve(ctx, args[1:], stdout, stderr)
		case "noop":
			// The do-nothing server alone, to compare by hand with a
			// server started otherwise.
			return serve(ctx, append([]string{"-store", "noop", "-listen", "127.0.0.1:50061"}, args[1:]...), stdout, stderr)
		}
	}
	return load(ctx, args, stdout, stderr)
}

// load drives one server at an address, closed loop, and reports its
// throughput, latency and, given its pid, its CPU time per lifecycle.
func load(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "127.0.0.1:50051", "ext_proc server `address`")
	conc := fs.Int("c", 16, "concurrent streams")
	total := fs.Int("n", 10000, "lifecycles to run")
	tenants := fs.Int("tenants", 100, "distinct x-tenant-id values")
	scenario := fs.String("scenario", "sse", "response kind: sse (7 chunks) or json")
	pid := fs.Int("pid", 0, "server `pid` whose CPU time to measure (0: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *conc < 1 || *total < 1 {
		return errors.New("-c and -n must be positive")
	}
	t, err := newTraffic(*scenario, *tenants)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := extprocv3.NewExternalProcessorClient(conn)

	// Warm up: connections, the server's pools and caches.
	if w := closedLoop(ctx, client, t, *conc, min(200, *total), 0); w.firstErr != nil {
		return fmt.Errorf("warm-up: %w", w.firstErr)
	}
	var cpu0, cpu1 time.Duration
	if *pid != 0 {
		if cpu0, err = cpuTime(*pid); err != nil {
			return err
		}
	}
	res := closedLoop(ctx, client, t, *conc, *total, 0)
	if *pid != 0 {
		if cpu1, err = cpuTime(*pid); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "requests %d in %v: %.0f req/s; latency p50 %v p99 %v; decision p50 %v p99 %v\n",
		res.n(), res.elapsed.Round(time.Millisecond), res.rate(),
		micro(percentile(res.totals, 50)), micro(percentile(res.totals, 99)),
		micro(percentile(res.decisions, 50)), micro(percentile(res.decisions, 99)))
	fmt.Fprintf(stdout, "statuses: %s\n", res.statusLine())
	if res.firstErr != nil {
		fmt.Fprintf(stdout, "first error: %v\n", res.firstErr)
	}
	if *pid != 0 {
		used := cpu1 - cpu0
		fmt.Fprintf(stdout, "server cpu %v: %.1f µs per request\n", used.Round(time.Millisecond), float64(used.Microseconds())/float64(res.n()))
	}
	return nil
}
