package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// child is a server loadgen started and measures.
type child struct {
	kind   string // noop, memory or redis
	cmd    *exec.Cmd
	conn   *grpc.ClientConn
	client extprocv3.ExternalProcessorClient

	rounds  []round // closed loop
	equal   []round // open loop, at the same rate for every child
	latency *tally  // the open-loop run at a fraction of its own rate
	rate    float64 // its closed-loop throughput
}

// minEqualArrivals is the fewest lifecycles an equal-load round may
// offer each server.
const minEqualArrivals = 20

// round is one measurement of a child.
type round struct {
	t     *tally
	cpu   time.Duration // the child's
	redis redisStats    // Redis's, for a redis child
}

func (r round) cpuPer() float64 { return float64(r.cpu.Microseconds()) / float64(r.t.n()) }

func (r round) redisPer() float64 { return float64(r.redis.cpu.Microseconds()) / float64(r.t.n()) }

// compare runs the comparison: each server in its own process, loaded
// in turn, round after round, so that every ratio compares figures taken
// minutes apart at most on the same machine.
func compare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	servers := fs.String("servers", "noop,memory,redis", "servers to compare, in the order loaded: noop, memory, redis")
	workers := fs.Int("c", 32, "concurrent streams")
	duration := fs.Duration("d", 5*time.Second, "length of each round's run per server")
	rounds := fs.Int("rounds", 3, "rounds; each loads every server once, in turn")
	equal := fs.Float64("equal", 0.8, "load of the equal-load rounds, as a fraction of the slowest server's closed-loop throughput (0: none)")
	fraction := fs.Float64("fraction", 0.5, "load of the latency run, as a fraction of each server's measured throughput")
	latencyFor := fs.Duration("latency-d", 5*time.Second, "length of the latency run per server")
	redisURL := fs.String("redis", "", "Redis `URL` for the redis server (default: start a redis-server)")
	tenants := fs.Int("tenants", 100, "distinct x-tenant-id values")
	scenario := fs.String("scenario", "sse", "response kind: sse (7 chunks) or json")
	profiles := fs.String("cpuprofile", "", "write each server's CPU profile to `dir`/KIND.pprof")
	serverCPUs := fs.String("server-cpus", "", "pin the servers to these CPUs (`list` as taskset takes it: 1 or 2-3), GOMAXPROCS set to match")
	clientCPUs := fs.String("client-cpus", "", "pin the load client, and a redis-server it starts, to these CPUs (`list`)")
	var tuning grpcTuning
	tuning.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	kinds := strings.Split(*servers, ",")
	for _, k := range kinds {
		if k != "noop" && k != "memory" && k != "redis" {
			return fmt.Errorf("unknown server %q in -servers (want noop, memory, redis)", k)
		}
	}
	// Written so that NaN fails too.
	if *workers < 1 || *rounds < 1 || *duration <= 0 || !(*fraction > 0 && *fraction <= 1) || !(*equal >= 0 && *equal <= 1) {
		return errors.New("-c, -rounds and -d must be positive, -fraction within (0, 1], -equal within [0, 1]")
	}
	t, err := newTraffic(*scenario, *tenants)
	if err != nil {
		return err
	}
	serverPin, err := parsePin(*serverCPUs)
	if err != nil {
		return fmt.Errorf("-server-cpus: %w", err)
	}
	clientPin, err := parsePin(*clientCPUs)
	if err != nil {
		return fmt.Errorf("-client-cpus: %w", err)
	}
	if clientPin.set() {
		if err := clientPin.apply(0); err != nil {
			return err
		}
		runtime.GOMAXPROCS(len(clientPin.cpus))
	}

	var rc *redis.Client
	if slices.Contains(kinds, "redis") {
		if *redisURL == "" {
			url, stop, err := startRedis(ctx, clientPin)
			if err != nil {
				return err
			}
			defer stop()
			*redisURL = url
		}
		opts, err := redis.ParseURL(*redisURL)
		if err != nil {
			return err
		}
		rc = redis.NewClient(opts)
		defer rc.Close()
	}

	var children []*child
	defer func() {
		for _, c := range children {
			c.stop()
		}
	}()
	for _, k := range kinds {
		extra := tuning.args()
		if k == "redis" {
			extra = append(extra, "-redis", *redisURL)
		}
		if *profiles != "" {
			extra = append(extra, "-cpuprofile", filepath.Join(*profiles, k+".pprof"))
		}
		c, err := startChild(ctx, k, extra, serverPin, stderr)
		if err != nil {
			return err
		}
		children = append(children, c)
	}

	fmt.Fprintf(stdout, "loadgen compare: %s; %d streams, %d rounds of %v per server; %s scenario (%d B request body, %d response chunks), %d tenants, 3 limits\n",
		*servers, *workers, *rounds, *duration, *scenario, len(chatBody), len(t.chunks), *tenants)
	if serverPin.set() || clientPin.set() {
		fmt.Fprintf(stdout, "pinned: servers on %s, load client on %s\n", cpuList(serverPin.cpus), cpuList(clientPin.cpus))
	}
	for _, c := range children {
		// Warm up: connections, pools, caches, the scripts in Redis.
		if w := closedLoop(ctx, c.client, t, *workers, 20**workers, 0); w.firstErr != nil {
			return fmt.Errorf("%s: warm-up: %w", c.kind, w.firstErr)
		}
	}
	for i := range *rounds {
		line, err := measureRound(ctx, children, rc, func(c *child) *tally {
			return closedLoop(ctx, c.client, t, *workers, 0, *duration)
		}, func(c *child, r round) { c.rounds = append(c.rounds, r) })
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "round %d: %s\n", i+1, line)
	}
	slowest := 0.0
	for _, c := range children {
		var lifecycles int
		var elapsed time.Duration
		for _, r := range c.rounds {
			lifecycles += r.t.n()
			elapsed += r.t.elapsed
		}
		c.rate = float64(lifecycles) / elapsed.Seconds()
		if slowest == 0 || c.rate < slowest {
			slowest = c.rate
		}
	}
	// Closed loop, each server runs as fast as the client lets it, each
	// at its own rate. A Go server's CPU time per lifecycle falls as its
	// rate rises: more messages share each write and each wake-up, and
	// some of what the runtime spends goes by the second (see
	// BENCHMARKS.md, "At equal load"). Offered the same rate, open loop,
	// every server handles the same traffic.
	equalRate := *equal * slowest
	if arrivals := equalRate * duration.Seconds(); equalRate > 0 && arrivals < minEqualArrivals {
		// A handful of lifecycles would measure the servers idling.
		return fmt.Errorf("-equal %v offers %.1f lifecycles a round of %v (%.0f/s); at least %d are needed: raise -equal or -d",
			*equal, arrivals, *duration, equalRate, minEqualArrivals)
	}
	for i := range *rounds {
		if equalRate == 0 {
			break
		}
		line, err := measureRound(ctx, children, rc, func(c *child) *tally {
			// The same arrivals for every server in a round, others
			// in the next.
			return openLoop(ctx, c.client, t, equalRate, *duration, 64**workers, uint64(i)+3)
		}, func(c *child, r round) { c.equal = append(c.equal, r) })
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "equal-load round %d (%.0f/s offered): %s\n", i+1, equalRate, line)
	}

	var minimal float64
	if rc != nil {
		if minimal, err = runMinimalScript(ctx, rc, *tenants, *workers, 20000); err != nil {
			return err
		}
	}
	for _, c := range children {
		c.latency = openLoop(ctx, c.client, t, *fraction*c.rate, *latencyFor, 64**workers, 2)
		if c.latency.firstErr != nil {
			return fmt.Errorf("%s: latency run: %w", c.kind, c.latency.firstErr)
		}
	}
	report(stdout, children, minimal, *fraction, equalRate)
	return nil
}

// measureRound measures every child in turn under load, hands each
// round to keep, and returns the round's line of the log.
func measureRound(ctx context.Context, children []*child, rc *redis.Client, load func(*child) *tally, keep func(*child, round)) (string, error) {
	var line []string
	for _, c := range children {
		r, err := measure(ctx, c, rc, func() *tally { return load(c) })
		if err != nil {
			return "", err
		}
		keep(c, r)
		s := fmt.Sprintf("%s %.0f/s %.0f µs", c.kind, r.t.rate(), r.cpuPer())
		if c.kind == "redis" {
			s += fmt.Sprintf(" + Redis %.0f µs, %.1f calls a read", r.redisPer(), r.redis.callsPerRead())
		}
		if r.t.dropped > 0 {
			s += fmt.Sprintf(" (%d arrivals dropped)", r.t.dropped)
		}
		line = append(line, s)
	}
	return strings.Join(line, " | "), nil
}

// measure runs load against c and takes c's CPU time, and Redis's for a
// redis child, over it.
func measure(ctx context.Context, c *child, rc *redis.Client, load func() *tally) (round, error) {
	var r round
	var rs0 redisStats
	var err error
	if c.kind == "redis" {
		if rs0, err = readRedisStats(ctx, rc); err != nil {
			return r, err
		}
	}
	cpu0, err := cpuTime(c.cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	r.t = load()
	cpu1, err := cpuTime(c.cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	r.cpu = cpu1 - cpu0
	if r.t.firstErr != nil {
		return r, fmt.Errorf("%s: %w (statuses %s)", c.kind, r.t.firstErr, r.t.statusLine())
	}
	if r.t.n() == 0 {
		return r, fmt.Errorf("%s: no lifecycle completed in %v", c.kind, r.t.elapsed)
	}
	if c.kind == "redis" {
		rs1, err := readRedisStats(ctx, rc)
		if err != nil {
			return r, err
		}
		r.redis = rs1.sub(rs0)
	}
	return r, nil
}

// startChild starts this program as a server of kind and connects to it.
func startChild(ctx context.Context, kind string, extra []string, p pin, stderr io.Writer) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{"serve", "-store", kind}, extra...)...)
	cmd.Stderr = stderr
	if p.set() {
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(len(p.cpus)))
	}
	dieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{kind: kind, cmd: cmd}
	if err := p.apply(cmd.Process.Pid); err != nil {
		c.stop()
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				addr <- a
			}
		}
		close(addr)
	}()
	var a string
	select {
	case a = <-addr:
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	if a == "" {
		c.stop()
		return nil, fmt.Errorf("the %s server did not start", kind)
	}
	c.conn, err = grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.stop()
		return nil, err
	}
	c.client = extprocv3.NewExternalProcessorClient(c.conn)
	return c, nil
}

// stop ends the child with SIGTERM, so that it writes its profile, and
// waits for it.
func (c *child) stop() {
	if c.conn != nil {
		_ = c.conn.Close()
	}
	_ = c.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}
