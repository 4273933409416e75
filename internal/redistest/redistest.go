// Package redistest starts throwaway redis-server processes for tests: on a
// free loopback port, without persistence unless [Durable], stopped when
// the test ends. Any
// package's tests may use it (the extproc and cmd tests too), and fault
// tests can kill a server and restart it on the same address.
//
// When redis-server is not on PATH, [Start] skips the test, except under CI
// (the CI environment variable set), where it fails it: CI must never pass
// by skipping. .ci/redis.sh installs redis-server.
package redistest

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds how long a server may take to answer its first PING.
const startTimeout = 10 * time.Second

// Server is a running redis-server child process.
type Server struct {
	tb   testing.TB
	bin  string
	args []string // extra redis-server arguments
	// sentinel, when set, is the sentinel.conf the server runs as a
	// Sentinel with.
	sentinel string
	env      []string // extra environment
	dir      string
	port     int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	out  *syncBuffer
}

// Option changes how [Start] runs the server.
type Option func(*Server)

// WithArgs passes extra arguments to redis-server, e.g. "--maxmemory",
// "10mb".
func WithArgs(args ...string) Option {
	return func(s *Server) { s.args = append(s.args, args...) }
}

// Durable makes the server keep its data across [Server.Kill] and
// [Server.Restart], as a production Redis with an append-only file does:
// every write is in the file, fsynced, before its client gets the reply
// (appendfsync always), so that a crash loses nothing a client was told
// had happened. What it loses is what no client heard back about, which
// is what the callers' handling of ambiguous failures is for.
//
// The file goes on tmpfs (/dev/shm) where the machine has one: a test
// crashes the process, not the machine, so what matters is that Redis
// has written the file before it replies, and an fsync to a shared disk
// on every write would only make the test slow.
func Durable() Option {
	return func(s *Server) {
		s.args = append(s.args, "--appendonly", "yes", "--appendfsync", "always")
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			dir, err := os.MkdirTemp("/dev/shm", "redistest-")
			if err != nil {
				s.tb.Fatalf("redistest: %v", err)
			}
			s.tb.Cleanup(func() { _ = os.RemoveAll(dir) })
			s.args = append(s.args, "--dir", dir)
		}
	}
}

// WithClockSkew runs the server with its wall clock moved by d (TIME
// answers d away from this machine's clock), to show that only the store's
// clock matters. It preloads a small shim (skew.c.in) built with the C
// compiler; without one the test is skipped, or failed under CI.
func WithClockSkew(d time.Duration) Option {
	return func(s *Server) {
		s.tb.Helper()
		cc, err := exec.LookPath("cc")
		if err != nil {
			missing(s.tb, "a C compiler (cc) to build the clock-skew shim")
		}
		src := filepath.Join(s.dir, "skew.c")
		lib := filepath.Join(s.dir, "skew.so")
		if err := os.WriteFile(src, skewSource, 0o644); err != nil {
			s.tb.Fatalf("redistest: %v", err)
		}
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", lib, src).CombinedOutput(); err != nil {
			s.tb.Fatalf("redistest: building the clock-skew shim: %v\n%s", err, out)
		}
		s.env = append(s.env, "LD_PRELOAD="+lib, "REDISTEST_SKEW_NS="+strconv.FormatInt(int64(d), 10))
	}
}

//go:embed skew.c.in
var skewSource []byte

// Start starts a redis-server on a free loopback port and returns once it
// answers PING. It is stopped (and its files removed) when tb ends.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(tb, "redis-server (apt-get install redis-server, or .ci/redis.sh)")
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	for _, o := range opts {
		o(s)
	}
	tb.Cleanup(s.Stop)
	// A free port can be taken between choosing it and redis-server
	// binding it; choose again a few times before giving up.
	var lastErr error
	for range 3 {
		if s.port, err = freePort(); err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		if lastErr = s.start(); lastErr == nil {
			return s
		}
	}
	tb.Fatalf("redistest: %v", lastErr)
	return nil
}

// missing skips tb, or fails it under CI, for a missing tool.
func missing(tb testing.TB, what string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("redistest: %s not found; CI must install it (.ci/redis.sh)", what)
	}
	tb.Skipf("redistest: %s not found; skipping", what)
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns a redis:// URL for database 0 of the server.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Kill kills the server with SIGKILL, as a crash would, and waits until
// it is gone. Its data is lost, unless the server is [Durable].
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

// Restart starts the server again on the same port, after [Server.Kill]
// (or kills it first), and waits until it answers.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		s.tb.Fatalf("redistest: restart: %v", err)
	}
}

// Stop kills the server if it is running. [Start] arranges for it to be
// called when the test ends.
func (s *Server) Stop() { s.Kill() }

// Log returns what the server has printed, for failure messages.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out == nil {
		return ""
	}
	return s.out.String()
}

func (s *Server) killLocked() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

func (s *Server) start() error {
	var args []string
	if s.sentinel != "" {
		// A sentinel takes its (writable) config file first.
		args = append(args, s.sentinel, "--sentinel")
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
		"--loglevel", "warning",
	)
	if s.sentinel == "" {
		args = append(args, "--save", "", "--appendonly", "no")
	}
	if major() >= 7 && s.sentinel == "" {
		// DEBUG SLEEP stands in for a slow server in fault tests; Redis 7
		// refuses DEBUG unless enabled.
		args = append(args, "--enable-debug-command", "local")
	}
	args = append(args, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), s.env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done, s.out = cmd, done, out
	s.mu.Unlock()

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-done:
			s.mu.Lock()
			s.cmd = nil
			s.mu.Unlock()
			return fmt.Errorf("redis-server exited on port %d: %s", s.port, out.String())
		default:
		}
		if err := ping(s.Addr()); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on port %d did not answer within %v: %v; log: %s", s.port, startTimeout, err, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ping sends PING and expects PONG (not, e.g., -LOADING).
func ping(addr string) error {
	reply, err := command(addr, "PING")
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("PING answered %q", reply)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var (
	versionOnce  sync.Once
	versionMajor int
)

// major returns redis-server's major version, or 0 if unknown.
func major() int {
	versionOnce.Do(func() {
		out, err := exec.Command("redis-server", "--version").Output()
		if err != nil {
			return
		}
		if m := regexp.MustCompile(`v=(\d+)\.`).FindSubmatch(out); m != nil {
			versionMajor, _ = strconv.Atoi(string(m[1]))
		}
	})
	return versionMajor
}

// syncBuffer collects the server's output; the process writes while a
// test may read.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartSentinel starts a Redis Sentinel that monitors the master at
// masterAddr under masterName (quorum 1), and returns once it answers.
func StartSentinel(tb testing.TB, masterName, masterAddr string) *Server {
	tb.Helper()
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	conf := filepath.Join(tb.TempDir(), "sentinel.conf")
	text := fmt.Sprintf("sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 1000\n", masterName, host, port, masterName)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return Start(tb, func(s *Server) { s.sentinel = conf })
}

// Cluster is a Redis Cluster of servers started by [StartCluster] or
// [StartReplicatedCluster].
type Cluster struct {
	Servers []*Server
}

// Addrs returns the nodes' host:port addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// StartCluster starts a Redis Cluster of n masters (n >= 3, no replicas)
// on loopback, with the hash slots spread over them, and returns once
// every node reports the cluster ok. It needs redis-cli besides
// redis-server.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return startCluster(tb, n, 0)
}

// StartReplicatedCluster starts a Redis Cluster of masters masters (>= 3)
// with one replica each, 2*masters servers on loopback (redis-cli
// --cluster create --cluster-replicas 1 picks which server replicates
// which; CLUSTER NODES tells), and returns once every node reports the
// cluster ok and every replica is in sync with its master, so that a
// test may fail a master over at once (CLUSTER FAILOVER on a replica).
func StartReplicatedCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	return startCluster(tb, 2*masters, 1)
}

func startCluster(tb testing.TB, n, replicas int) *Cluster {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		missing(tb, "redis-cli (apt-get install redis-tools)")
	}
	c := &Cluster{}
	for range n {
		dir := tb.TempDir()
		c.Servers = append(c.Servers, Start(tb, WithArgs(
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "5000",
		)))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(startTimeout)
	for _, s := range c.Servers {
		for {
			info, err := command(s.Addr(), "CLUSTER INFO")
			ok := err == nil && strings.Contains(info, "cluster_state:ok")
			if ok && replicas > 0 {
				// A replica must be in sync before it can take over;
				// a master's section says role:master and no link.
				repl, err := command(s.Addr(), "INFO replication")
				ok = err == nil && (strings.Contains(repl, "role:master") || strings.Contains(repl, "master_link_status:up"))
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("redistest: cluster node %s not ok within %v: %v %s", s.Addr(), startTimeout, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c
}

// command sends one inline command and returns its status or bulk reply.
func command(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("%s: reply %q", cmd, line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("%s: reply %q", cmd, line)
}
