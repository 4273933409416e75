package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tokenwarden/tokenwarden/internal/envoyconfig"
	"github.com/tokenwarden/tokenwarden/internal/localrun"
)

// Files of the repository the demo runs on, relative to its root.
const (
	envoyConfig       = "envoy/envoy.yaml"
	tokenwardenConfig = "envoy/demo/tokenwarden.yaml"
	demoToken         = "envoy/demo-jwt/acme.jwt"
)

// startTimeout bounds how long the three processes may take to become ready
// (the builds come before it and are not counted).
const startTimeout = 60 * time.Second

// stopGrace is how long the processes get to exit after the signal before
// they are killed. tokenwarden settles its open streams in that time.
const stopGrace = 20 * time.Second

// run is the whole program: main only adds signals and the exit code. It
// returns nil when ctx ends (Ctrl-C) and every process stopped cleanly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	root, err := localrun.FindRoot()
	if err != nil {
		return err
	}
	envoyBin, err := localrun.FindEnvoy(o.envoy)
	if err != nil {
		return err
	}
	for _, a := range o.addrs.all() {
		if err := checkFree(a.addr); err != nil {
			return fmt.Errorf("%s %s: %w (docker compose up, or another demo, may hold it; pick another address with %s)", a.flag, a.addr, err, a.flag)
		}
	}
	dir, err := os.MkdirTemp("", "tokenwarden-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	fmt.Fprintln(stdout, "demo: building tokenwarden and fakellm")
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+string(os.PathSeparator), "./cmd/tokenwarden", "./cmd/fakellm")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	cfg, err := os.ReadFile(filepath.Join(root, envoyConfig))
	if err != nil {
		return err
	}
	rendered, err := envoyconfig.Render(cfg, envoyconfig.Addrs{Listen: o.addrs.listen, Admin: o.addrs.envoyAdmin,
		Tokenwarden: o.addrs.tokenwarden, Fakellm: o.addrs.fakellm})
	if err != nil {
		return fmt.Errorf("%s: %w", envoyConfig, err)
	}
	envoyFile := filepath.Join(dir, "envoy.yaml")
	if err := os.WriteFile(envoyFile, rendered, 0o644); err != nil {
		return err
	}

	g := &group{stdout: stdout, exited: make(chan *proc, 3)}
	defer g.stop(stderr) // on every way out; a second call finds them stopped
	steps := []struct {
		name string
		bin  string
		args []string
	}{
		{"fakellm", filepath.Join(dir, "fakellm"), []string{"-listen", o.addrs.fakellm}},
		{"tokenwarden", filepath.Join(dir, "tokenwarden"), []string{"-config", filepath.Join(root, tokenwardenConfig),
			"-listen", o.addrs.tokenwarden, "-admin", o.addrs.tokenwardenAdmin}},
		// --disable-hot-restart: no shared memory to collide with another
		// Envoy on the machine; a short flush interval shows each request's
		// access log line right away.
		{"envoy", envoyBin, []string{"-c", envoyFile, "--disable-hot-restart", "--log-level", "warn",
			"--file-flush-interval-msec", "200"}},
	}
	for _, s := range steps {
		if err := g.start(s.name, s.bin, s.args...); err != nil {
			return err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, startTimeout)
	err = g.awaitReady(rctx, o.addrs)
	cancel()
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	printBanner(stdout, o.addrs)

	select {
	case <-ctx.Done():
	case p := <-g.exited:
		// Ctrl-C in a terminal signals the whole process group: a child
		// may stop (cleanly) before this process sees its own signal. The
		// servers exit 0 (or by the signal) only when told to stop, so that
		// is what a clean exit means; anything else is a failure.
		if p.err != nil && !localrun.StoppedBySignal(p.cmd) {
			return fmt.Errorf("%s exited: %v", p.name, p.err)
		}
	}
	fmt.Fprintln(stdout, "demo: stopping")
	if err := g.stop(stderr); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "demo: stopped")
	return nil
}

// printBanner tells the user what to type. The commands are the README's.
func printBanner(w io.Writer, a addrs) {
	target := "localhost:" + portOf(a.listen)
	fmt.Fprintf(w, `
demo: ready. Envoy listens on %s, tokenwarden's metrics are at http://%s/metrics.
demo: in another terminal, from the repository, send six requests as tenant acme (free tier,
demo: 5 requests a minute); the sixth gets a 429:

TOKEN=$(cat %s)
for i in 1 2 3 4 5 6; do
  curl -s -o /dev/null -w '%%{http_code}\n' %s/v1/chat/completions \
    -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
    -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
done

demo: Ctrl-C stops Envoy, tokenwarden and fakellm.
`, a.listen, a.tokenwardenAdmin, demoToken, target)
}

// checkLoopback accepts host:port addresses on a loopback interface with a
// port other than 0. The demo's JWT signing key is public: its Envoy must
// not be reachable from other machines.
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("%q: want a port number from 1 to 65535", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: want a loopback address (127.0.0.1, ::1, localhost): the demo's tokens are signed with a public key", addr)
	}
	return nil
}

// checkFree reports whether addr can be listened on now.
func checkFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.New("in use")
	}
	return ln.Close()
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// awaitReady waits for each of localrun.StackChecks in turn, failing
// early when a process exits.
func (g *group) awaitReady(ctx context.Context, a addrs) error {
	client := &http.Client{Timeout: time.Second}
	checks := localrun.StackChecks(client, a.fakellm, a.tokenwardenAdmin, a.envoyAdmin)
	for _, c := range checks {
		for !c.OK() {
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w", c.What, ctx.Err())
			case p := <-g.exited:
				return fmt.Errorf("%s exited while waiting for %s: %v", p.name, c.What, p.err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}
