// Command soak runs tokenwarden for a long time behind the real Envoy, on
// Redis, under steady mixed traffic, and checks that nothing grows that
// should not: heap, goroutines, Redis memory, reservation records.
//
//	go run ./cmd/soak [-duration 30m] [-every 1m] [-rate N] [-redis URL]
//
// It builds tokenwarden and fakellm, starts redis-server (or uses the one
// at -redis, which must be empty and otherwise idle), fakellm, tokenwarden
// on the Redis store with five limits (config.go), and Envoy on the
// shipped envoy/envoy.yaml with its addresses moved to free loopback
// ports. Envoy is -envoy, $ENVOY_BIN or envoy on PATH.
//
// First it finds the maximum load: a closed-loop ramp of rising
// concurrency, each step -ramp-step long, until the throughput stops
// rising. Then it offers half of that (or -rate requests a second) open
// loop for -duration: OpenAI chat streamed and JSON, Anthropic messages
// streamed, clients that cancel mid-stream and upstream 500s and 503s,
// from -tenants tenants of which four are "hot" and run into their limit
// (traffic.go). Every -every it prints one row of a markdown table:
// requests a second, responses by class, latency, tokenwarden's heap and
// goroutines (its /metrics), tokenwarden's and Envoy's RSS (/proc), Redis
// used_memory and keys (INFO), the load average.
//
// When the traffic stops it checks (verdict.go) that heap and goroutines
// stayed flat, that goroutines came back to their idle level, that no
// reservation record is left in Redis, that tokenwarden settled every
// request it admitted, once, and that Redis memory and keys return to
// their level before the traffic once the counters expire. It prints the
// verdict as markdown and exits 1 if a check failed. -pprof DIR saves
// tokenwarden's heap and goroutine profiles there at the end of the
// traffic, the evidence a leak needs.
//
// Run it from the repository (it needs the go command and the repository's
// files). It sends traffic only to the processes it starts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	rep, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "soak:", err)
		}
		os.Exit(2)
	}
	if !rep.passed() {
		os.Exit(1)
	}
}
