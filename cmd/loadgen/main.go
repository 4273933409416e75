// Command loadgen measures what tokenwarden costs on top of the ext_proc
// exchange Envoy makes with any external processor. It plays Envoy's
// side of the stream — one gRPC stream per HTTP request: request
// headers, the buffered request body, response headers, the response
// body in pipelined chunks — with tokenwarden's documented filter
// config, and a 2 KB streamed OpenAI chat request whose answer comes in
// seven SSE chunks.
//
//	loadgen compare [-servers noop,memory,redis] [-c 32] [-d 5s] [-rounds 3] [-equal 0.8] [-fraction 0.5] [-redis URL] [-server-cpus LIST -client-cpus LIST]
//
// compare starts each server in a process of its own (this program with
// "serve"): the do-nothing ext_proc server, the protocol floor; and
// tokenwarden with three limits on the memory store and on Redis (a
// redis-server it starts, or the one at -redis). It loads them in turn,
// round after round, closed loop, and reports each one's throughput, its
// CPU time per lifecycle (from /proc, so Linux only) and the ratio to
// the do-nothing server's in the same round; for Redis, Redis's CPU time
// per lifecycle and, from INFO commandstats, the time per call of
// tokenwarden's scripts next to a minimal 3-key reservation script's.
// Then, as many rounds again, it offers every server the same rate, open
// loop (-equal of the slowest server's throughput), and reports the same
// figures: a Go server's CPU time per lifecycle falls as its rate rises
// (more messages share each system call and wake-up), so closed loop a
// slower server is also charged for running slower. Last, it offers each
// server -fraction of its own throughput, open loop, and reports the
// decision latency (request body sent → its reply) and the lifecycle
// latency at p50 and p99. -cpuprofile DIR
// writes each server's CPU profile. -server-cpus and -client-cpus pin the
// servers and the load client (with a redis-server it starts) to CPUs of
// their own, so that on a small machine a latency percentile measures
// the server rather than the scheduler's choices between it and the
// client: `loadgen compare -server-cpus 1 -client-cpus 0`.
//
//	loadgen serve -store noop|memory|redis [-redis URL] [-redis-timeout D] [-listen ADDR]
//	loadgen noop [-listen 127.0.0.1:50061]
//	loadgen -target 127.0.0.1:50051 [-pid PID] [-c 16] [-n 10000]
//
// serve runs one of those servers alone; noop is serve -store noop. The
// last form loads a server started otherwise (the tokenwarden binary,
// say, with admin_pprof) and, given its pid, reports its CPU time per
// request.
//
// It sends traffic only to the addresses it is given or starts; run it
// against servers on this machine.
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
