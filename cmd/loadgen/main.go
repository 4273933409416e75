// Command loadgen drives an ext_proc server the way Envoy does — one gRPC
// stream per HTTP request, buffered request body, streamed response — and
// reports throughput, latency and, given the server's pid, the server's
// CPU time per request. With "noop" it serves a do-nothing ext_proc
// server instead, the baseline tokenwarden's CPU cost is compared with.
//
//	loadgen noop -listen 127.0.0.1:50061
//	loadgen -target 127.0.0.1:50051 -pid 1234 -c 16 -n 20000
//
// It sends traffic only to the address it is given; run it against
// servers on this machine.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}
