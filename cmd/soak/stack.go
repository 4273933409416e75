package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/internal/envoyconfig"
	"github.com/tokenwarden/tokenwarden/internal/localrun"
)

// stack is the running processes: Redis (unless -redis), fakellm,
// tokenwarden, Envoy.
type stack struct {
	dir         string
	procs       []*proc // in start order
	tokenwarden *proc
	envoy       *proc
	rdb         *redis.Client
	listen      string // Envoy's listener
	envoyAdmin  string
	twAdmin     string // tokenwarden's /metrics
	redisURL    string
}

// startStack builds tokenwarden and fakellm into dir and starts the
// stack. On error it stops what it started.
func startStack(ctx context.Context, root, dir string, o options, stdout io.Writer) (st *stack, err error) {
	envoyBin, err := localrun.FindEnvoy(o.envoy)
	if err != nil {
		return nil, err
	}
	redisBin := ""
	if o.redis == "" {
		if redisBin, err = exec.LookPath("redis-server"); err != nil {
			return nil, errors.New("no redis-server on PATH: install it (.ci/redis.sh) or pass -redis URL")
		}
	}
	fmt.Fprintln(stdout, "soak: building tokenwarden and fakellm")
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+string(os.PathSeparator), "./cmd/tokenwarden", "./cmd/fakellm")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}

	st = &stack{dir: dir}
	defer func() {
		if err != nil {
			st.stop()
		}
	}()
	addrs := make([]string, 6)
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return st, err
		}
	}
	llm, tw, twAdmin := addrs[0], addrs[1], addrs[2]
	st.listen, st.envoyAdmin, st.twAdmin = addrs[3], addrs[4], twAdmin

	st.redisURL = o.redis
	if redisBin != "" {
		host, port, _ := net.SplitHostPort(addrs[5])
		p, err := startProc(dir, "redis", redisBin, "--port", port, "--bind", host, "--dir", dir,
			"--save", "", "--appendonly", "no", "--loglevel", "warning")
		if err != nil {
			return st, err
		}
		st.procs = append(st.procs, p)
		st.redisURL = "redis://" + addrs[5] + "/0"
	}
	ropts, err := redis.ParseURL(st.redisURL)
	if err != nil {
		return st, fmt.Errorf("-redis: %w", err)
	}
	st.rdb = redis.NewClient(ropts)
	if err := awaitReady(ctx, st.procs, []localrun.Check{{What: "Redis to answer PING", OK: func() bool {
		return st.rdb.Ping(ctx).Err() == nil
	}}}); err != nil {
		return st, err
	}
	if n, err := st.rdb.DBSize(ctx).Result(); err != nil || n != 0 {
		return st, fmt.Errorf("Redis %s: %d keys (%v): the soak needs an empty database, to see what it leaves", st.redisURL, n, err)
	}

	cfgFile := filepath.Join(dir, "tokenwarden.yaml")
	if err := os.WriteFile(cfgFile, []byte(tokenwardenConfig(tw, twAdmin, st.redisURL, o.window)), 0o600); err != nil {
		return st, err
	}
	shipped, err := os.ReadFile(filepath.Join(root, envoyConfig))
	if err != nil {
		return st, err
	}
	rendered, err := envoyconfig.Render(shipped, envoyconfig.Addrs{Listen: st.listen, Admin: st.envoyAdmin, Tokenwarden: tw, Fakellm: llm})
	if err != nil {
		return st, fmt.Errorf("%s: %w", envoyConfig, err)
	}
	envoyFile := filepath.Join(dir, "envoy.yaml")
	if err := os.WriteFile(envoyFile, rendered, 0o644); err != nil {
		return st, err
	}

	p, err := startProc(dir, "fakellm", filepath.Join(dir, "fakellm"), "-listen", llm)
	if err != nil {
		return st, err
	}
	st.procs = append(st.procs, p)
	if st.tokenwarden, err = startProc(dir, "tokenwarden", filepath.Join(dir, "tokenwarden"), "-config", cfgFile); err != nil {
		return st, err
	}
	st.procs = append(st.procs, st.tokenwarden)
	// --concurrency 2: two worker threads, as on the machine the soak
	// was written for, and a fixed number of Envoy's connections to
	// tokenwarden whatever the machine. --disable-hot-restart: no shared
	// memory to collide with another Envoy.
	if st.envoy, err = startProc(dir, "envoy", envoyBin, "-c", envoyFile, "--disable-hot-restart",
		"--concurrency", "2", "--log-level", "warn"); err != nil {
		return st, err
	}
	st.procs = append(st.procs, st.envoy)
	err = awaitReady(ctx, st.procs, localrun.StackChecks(admin, llm, twAdmin, st.envoyAdmin))
	return st, err
}

// stop stops the processes and closes the Redis client.
func (st *stack) stop() error {
	err := stopAll(st.procs)
	st.procs = nil
	if st.rdb != nil {
		st.rdb.Close()
	}
	return err
}

// settle waits until tokenwarden has no stream open and no settlement
// waiting for a retry, or until timeout.
func (st *stack) settle(ctx context.Context, timeout time.Duration) (metrics, error) {
	deadline := time.Now().Add(timeout)
	for {
		m, err := scrape(st.twAdmin)
		if err != nil {
			return nil, err
		}
		if m.sum("tokenwarden_streams_open") == 0 && m.sum("tokenwarden_settlements_pending_retry") == 0 {
			return m, nil
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("tokenwarden still has %v streams open and %v settlements pending %v after the traffic",
				m.sum("tokenwarden_streams_open"), m.sum("tokenwarden_settlements_pending_retry"), timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
