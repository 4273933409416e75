package envoy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// This file runs the end-to-end rig: the real tokenwarden and fakellm binaries
// as processes, and a real Envoy on the shipped envoy.yaml (only its addresses
// rewritten) between an HTTP client and them:
//
//	client ─HTTP─▶ Envoy :listen ─ext_proc─▶ tokenwarden (memory store)
//	                     └─router──────────▶ fakellm
//
// Starting Envoy and building the binaries is most of the cost, so one rig
// serves every e2e test of the test binary: it starts on first use and stops
// in TestMain. Tests keep out of each other's way by calling as distinct
// tenants (newE2ETenant) and run in parallel; the ones that stop tokenwarden
// (SIGKILL, SIGTERM) or watch a process-wide metric run serially, which Go
// does before it resumes any parallel test.

// TestMain stops the shared end-to-end rig once every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	shared.stop()
	os.Exit(code)
}

// e2eConfig is tokenwarden's config in the rig. Identity is what envoy.yaml
// hands over: tenant and tier in the headers jwt_authn sets from the verified
// token's claims, and the user read straight from the verified payload in
// jwt_authn's dynamic metadata (which a client cannot forge). Limits use fixed
// windows far longer than a test run, so every remaining figure is exact.
const e2eConfig = `
log: {level: debug, format: json}
shutdown_grace: 5s
store: {type: memory}
identity:
  attributes:
    tenant: {header: x-tenant-id}
    tier:   {header: x-tier, default: standard}
    user:   {metadata: {namespace: envoy.filters.http.jwt_authn, key: payload, path: [sub]}}
    run:    {header: x-agent-run-id}
    learn:  {header: x-e2e-learn}
    provider: {header: x-e2e-provider}
    cluster:  {envoy_attribute: xds.cluster_name}
    account:  {envoy_attribute: "xds.route_metadata.filter_metadata['tokenwarden']['provider']"}
  required: [tenant]
# An Azure OpenAI deployment serves the model it was created with, whatever
# the body's "model" says.
azure:
  deployments:
    e2e-prod-4o: gpt-4o
estimation:
  tokenizer: approximate
  chars_per_token: 4
  default_output_cap: 1024
  inject_output_cap: true
  inject_stream_usage: true
  # Learned output reservations, for the callers that send x-e2e-learn
  # only: a request without the scope's attribute reserves its cap.
  learned_output: {enabled: true, scope: [learn], min_samples: 5, floor: 16}
# Round prices, so that a settlement's cost is known from its tokens:
# e2eCostMicros.
models:
  default: {input: 1.00, output: 2.00}
# A usage report beyond gpt-4o-mini's context window is charged at it.
settlement:
  context_windows: {gpt-4o-mini: 128000}
limits:
  - name: e2e-tenant-tokens
    dimension: tokens
    scope: [tenant]
    algorithm: fixed_window
    limit: 2000000
    window: 31d
  - name: e2e-user-requests
    dimension: requests
    scope: [user]
    algorithm: fixed_window
    limit: 1000
    window: 31d
  # Only for callers whose token says tier "tight": small enough that the
  # second request of a test trips it.
  - name: e2e-tight-tokens
    dimension: tokens
    scope: [tenant]
    match: {tier: tight}
    algorithm: sliding_window
    limit: 3000
    window: 1m
  # Only for callers whose token says tier "parallel": two requests in
  # flight per tenant.
  - name: e2e-parallel
    dimension: concurrent
    scope: [tenant]
    match: {tier: parallel}
    limit: 2
    lease: 10m
  # Only for callers whose token says tier "wait": three requests per 2s
  # window per tenant, and a refused request waits for the next window
  # rather than getting a 429.
  - name: e2e-wait
    dimension: requests
    scope: [tenant]
    match: {tier: wait}
    algorithm: fixed_window
    limit: 3
    window: 2s
    on_exhausted: {wait_up_to: 3s}
  # An agent run's lifetime budget: three steps, for requests that name a
  # run.
  - name: e2e-run-steps
    dimension: requests
    scope: [run]
    algorithm: lifetime
    limit: 3
    max_duration: 1h
  # Only for callers whose token says tier "degrade": their first gpt-4o
  # request goes to gpt-4o, the rest to gpt-4o-mini, which envoy.yaml's
  # x-tokenwarden-model route sends to the rig's second fakellm.
  - name: e2e-degrade-4o
    dimension: requests
    scope: [tenant]
    match: {tier: degrade, model: gpt-4o}
    algorithm: fixed_window
    limit: 1
    window: 31d
    on_exhausted: {downgrade_to: gpt-4o-mini}
  # The same for Gemini, which names the model in the path.
  - name: e2e-degrade-pro
    dimension: requests
    scope: [tenant]
    match: {tier: degrade, model: gemini-2.5-pro}
    algorithm: fixed_window
    limit: 1
    window: 31d
    on_exhausted: {downgrade_to: gemini-2.5-flash}
  # Where the "degrade" callers' tokens were charged, model by model.
  - name: e2e-degrade-tokens
    dimension: tokens
    scope: [tenant, model]
    match: {tier: degrade}
    algorithm: fixed_window
    limit: 1000000
    window: 31d
  # A provider account, for the callers that name one in x-e2e-provider
  # only: the provider's 429s and remaining figures correct it, model by
  # model. A sliding window of 20s (slots of 2s) lets a provider's 429 of
  # a few seconds block it, for no longer than that.
  - name: e2e-provider-tokens
    dimension: tokens
    scope: [provider, model]
    algorithm: sliding_window
    limit: 100000
    window: 20s
  # The same account per upstream cluster and the account the route's
  # metadata names, which Envoy sends in the request attributes the rig
  # asks for.
  - name: e2e-provider-cluster
    dimension: requests
    scope: [provider, cluster, account, model]
    algorithm: fixed_window
    limit: 500
    window: 31d
`

// Figures of e2eConfig the tests compute with.
const (
	e2eTenantTokens = 2000000
	e2eUserRequests = 1000
	e2eTightTokens  = 3000
	e2eTightName    = "e2e-tight-tokens"

	e2eProviderClusterRequests = 500
)

// shared is the rig every e2e test uses.
var shared rigHolder

type rigHolder struct {
	once sync.Once
	rig  *e2eRig
	err  error
}

// e2eRig is the running stack.
type e2eRig struct {
	dir      string // temporary files; removed by stop
	twBin    string
	twConfig string
	llm      *e2eProc
	llmAddr  string
	// llm2 is a second fakellm, the upstream of the fallback model's
	// route (see e2eRigRoutes).
	llm2     *e2eProc
	llm2Addr string
	// app is a second application, not an LLM, behind a route of its
	// own on the same listener (see e2eAppRoute).
	app         *e2eApp
	envoy       *e2eProc
	listen      string // Envoy's "llm" listener
	admin       string // Envoy's admin interface
	startupTime time.Duration

	mu sync.Mutex
	tw *twProcess // the current tokenwarden; replaced by restartTokenwarden
	// twEnv is added to tokenwarden's environment (NAME=value).
	twEnv []string
}

// e2e returns the shared rig, starting it on first use. Without Envoy the test
// is skipped (failed in CI), as are all e2e tests under -short.
func e2e(t *testing.T) *e2eRig {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: starts Envoy, tokenwarden and fakellm")
	}
	bin := envoyBinary(t)
	if _, err := exec.LookPath("go"); err != nil {
		if inCI() {
			t.Fatalf("end-to-end: no go command to build the binaries: %v", err)
		}
		t.Skipf("end-to-end: no go command to build the binaries: %v", err)
	}
	shared.once.Do(func() {
		// renderBootstrap reports through t; a failure there fails this
		// test and leaves rig nil, which later tests report below.
		shared.rig, shared.err = startRig(t, bin)
	})
	if shared.err != nil {
		t.Fatalf("end-to-end rig: %v", shared.err)
	}
	if shared.rig == nil {
		t.Fatal("end-to-end rig failed to start in an earlier test")
	}
	return shared.rig
}

func (h *rigHolder) stop() {
	if h.rig != nil {
		h.rig.stop()
	}
}

// startRig builds the binaries and starts fakellm, tokenwarden and Envoy.
func startRig(t *testing.T, envoyBin string) (*e2eRig, error) {
	t.Helper()
	begin := time.Now()
	dir, err := os.MkdirTemp("", "tokenwarden-e2e-")
	if err != nil {
		return nil, err
	}
	r := &e2eRig{dir: dir}
	// Stop what did start on any way out but success, t.Fatal included.
	started := false
	defer func() {
		if !started {
			r.stop()
		}
	}()

	// Two builds in parallel: the second core is otherwise idle here.
	var wg sync.WaitGroup
	var twErr, llmErr error
	var llmBin string
	wg.Go(func() { r.twBin, twErr = e2eBuild(dir, "tokenwarden") })
	wg.Go(func() { llmBin, llmErr = e2eBuild(dir, "fakellm") })
	wg.Wait()
	if err := errors.Join(twErr, llmErr); err != nil {
		return nil, err
	}

	r.llm, err = startE2EProc(dir, "fakellm", llmBin, "-listen", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m, err := r.llm.awaitOutput(regexp.MustCompile(`msg=listening addr=(\S+)`), 10*time.Second)
	if err != nil {
		return nil, err
	}
	r.llmAddr = m[1]
	r.llm2, err = startE2EProc(dir, "fakellm-fallback", llmBin, "-listen", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m, err = r.llm2.awaitOutput(regexp.MustCompile(`msg=listening addr=(\S+)`), 10*time.Second)
	if err != nil {
		return nil, err
	}
	r.llm2Addr = m[1]

	if r.app, err = startE2EApp(); err != nil {
		return nil, err
	}

	r.twConfig = filepath.Join(dir, "tokenwarden.yaml")
	if err := os.WriteFile(r.twConfig, []byte(e2eConfig), 0o644); err != nil {
		return nil, err
	}
	if r.tw, err = r.startTokenwarden("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		return nil, err
	}

	// Envoy binds port 0 and reports what it got: no window in which another
	// process can take a port chosen in advance.
	cfg := filepath.Join(dir, "envoy.yaml")
	a := addrs{listen: "127.0.0.1:0", admin: "127.0.0.1:0", tokenwarden: r.tw.listen, upstream: r.llmAddr}
	if err := os.WriteFile(cfg, renderBootstrap(t, a, e2eRigRoutes(t), e2eFallbackRoute(t, r.llm2Addr), e2eRigRequestAttributes(t), e2eAppRoute(t, r.app.addr), e2eWebSocketUpgrades(t)), 0o644); err != nil {
		return nil, err
	}
	adminFile := filepath.Join(dir, "envoy-admin-address")
	// --disable-hot-restart: no shared-memory base id to collide with other
	// Envoys on the machine (the other tests of this package run some);
	// --file-flush-interval-msec: access log lines show up within the test.
	r.envoy, err = startE2EProc(dir, "envoy", envoyBin, "-c", cfg, "--disable-hot-restart", "--concurrency", "2",
		"--log-level", "warn", "--file-flush-interval-msec", "50", "--admin-address-path", adminFile)
	if err != nil {
		return nil, err
	}
	if err := r.awaitEnvoy(adminFile, 20*time.Second); err != nil {
		return nil, err
	}
	started = true
	r.startupTime = time.Since(begin)
	t.Logf("end-to-end rig up in %v: envoy %s (admin %s), tokenwarden %s, fakellm %s",
		r.startupTime.Round(time.Millisecond), r.listen, r.admin, r.tw.listen, r.llmAddr)
	return r, nil
}

// e2eBuild builds ./cmd/<name> of this module into dir. The binaries are built
// without -race even under go test -race: they run as the real thing would,
// and Envoy's 1 s message_timeout stays meaningful on a loaded machine.
func e2eBuild(dir, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, b)
	}
	return out, nil
}

// awaitEnvoy waits until Envoy's admin interface says ready and its
// tokenwarden cluster reports the host healthy (the gRPC health check passed),
// and learns the listener's address.
func (r *e2eRig) awaitEnvoy(adminFile string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for ; ; time.Sleep(50 * time.Millisecond) {
		if r.envoy.exited() {
			return fmt.Errorf("envoy exited early:\n%s", r.envoy.stderr.String())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("envoy not ready after %v (admin %q, listener %q):\n%s", timeout, r.admin, r.listen, r.envoy.stderr.String())
		}
		if r.admin == "" {
			b, err := os.ReadFile(adminFile)
			if err != nil || len(bytes.TrimSpace(b)) == 0 {
				continue
			}
			r.admin = strings.TrimSpace(string(b))
		}
		if code, _, err := e2eGet("http://" + r.admin + "/ready"); err != nil || code != http.StatusOK {
			continue
		}
		if r.listen == "" {
			addr, err := r.listenerAddr("llm")
			if err != nil {
				continue
			}
			r.listen = addr
		}
		if healthy, _ := r.twHealthy(); healthy {
			return nil
		}
	}
}

// listenerAddr asks Envoy's admin interface where a listener is bound.
func (r *e2eRig) listenerAddr(name string) (string, error) {
	code, body, err := e2eGet("http://" + r.admin + "/listeners?format=json")
	if err != nil || code != http.StatusOK {
		return "", fmt.Errorf("/listeners: %d %v", code, err)
	}
	var ls struct {
		ListenerStatuses []struct {
			Name         string `json:"name"`
			LocalAddress struct {
				SocketAddress struct {
					Address   string `json:"address"`
					PortValue int    `json:"port_value"`
				} `json:"socket_address"`
			} `json:"local_address"`
		} `json:"listener_statuses"`
	}
	if err := json.Unmarshal([]byte(body), &ls); err != nil {
		return "", err
	}
	for _, l := range ls.ListenerStatuses {
		if l.Name == name && l.LocalAddress.SocketAddress.PortValue != 0 {
			sa := l.LocalAddress.SocketAddress
			return net.JoinHostPort(sa.Address, strconv.Itoa(sa.PortValue)), nil
		}
	}
	return "", fmt.Errorf("no bound listener %q in %s", name, body)
}

// twHealthy reports whether Envoy's active gRPC health check currently
// passes for the tokenwarden host, and the host's health flags.
func (r *e2eRig) twHealthy() (bool, string) {
	_, body, err := e2eGet("http://" + r.admin + "/clusters")
	if err != nil {
		return false, err.Error()
	}
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), twCluster+"::"); ok && strings.Contains(rest, "::health_flags::") {
			flags := rest[strings.LastIndex(rest, "::")+2:]
			return flags == "healthy", flags
		}
	}
	return false, "no tokenwarden host in /clusters"
}

func (r *e2eRig) stop() {
	r.mu.Lock()
	tw := r.tw
	r.mu.Unlock()
	for _, p := range []*e2eProc{r.envoy, tw.proc(), r.llm, r.llm2} {
		if p != nil {
			p.kill()
		}
	}
	r.app.stop()
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
}

// twProcess is one run of the tokenwarden binary.
type twProcess struct {
	*e2eProc
	listen, admin string // bound addresses, from its start-up log line
}

func (p *twProcess) proc() *e2eProc {
	if p == nil {
		return nil
	}
	return p.e2eProc
}

// startTokenwarden runs tokenwarden on the rig's config and returns once it
// has logged its addresses and /readyz answers 200.
func (r *e2eRig) startTokenwarden(listen, admin string) (*twProcess, error) {
	return r.startTokenwardenWith(r.twConfig, listen, admin)
}

// startTokenwardenWith is startTokenwarden on another config file.
func (r *e2eRig) startTokenwardenWith(config, listen, admin string) (*twProcess, error) {
	p, err := startE2EProcEnv(r.dir, "tokenwarden", r.twBin, r.twEnv, "-config", config, "-listen", listen, "-admin", admin)
	if err != nil {
		return nil, err
	}
	started, err := p.awaitLog("tokenwarden started", 10*time.Second)
	if err != nil {
		p.kill()
		return nil, err
	}
	tw := &twProcess{e2eProc: p}
	tw.listen, _ = started["listen"].(string)
	tw.admin, _ = started["admin"].(string)
	if tw.listen == "" || tw.admin == "" {
		p.kill()
		return nil, fmt.Errorf("tokenwarden start-up line lacks listen/admin: %v", started)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, err := e2eGet("http://" + tw.admin + "/readyz")
		if err == nil && code == http.StatusOK {
			return tw, nil
		}
		if time.Now().After(deadline) || p.exited() {
			p.kill()
			return nil, fmt.Errorf("tokenwarden /readyz: %d %v\n%s", code, err, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tokenwarden returns the current tokenwarden process.
func (r *e2eRig) tokenwarden() *twProcess {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tw
}

// killTokenwarden kills tokenwarden with SIGKILL, as a crash or the OOM
// killer would: no graceful stop, no settling.
func (r *e2eRig) killTokenwarden() *twProcess {
	tw := r.tokenwarden()
	tw.kill()
	return tw
}

// restartTokenwarden starts tokenwarden again on the addresses of old, where
// Envoy's cluster points.
func (r *e2eRig) restartTokenwarden(old *twProcess) error {
	tw, err := r.startTokenwarden(old.listen, old.admin)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.tw = tw
	r.mu.Unlock()
	return nil
}

// e2eProc is a child process with its output collected.
type e2eProc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{} // closed when the process has exited
}

func startE2EProc(dir, name, bin string, args ...string) (*e2eProc, error) {
	return startE2EProcEnv(dir, name, bin, nil, args...)
}

// startE2EProcEnv is startE2EProc with env (NAME=value) added to the
// child's environment.
func startE2EProcEnv(dir, name, bin string, env []string, args ...string) (*e2eProc, error) {
	p := &e2eProc{name: name, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	setE2EDeathSignal(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *e2eProc) kill() {
	if p == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.done
}

func (p *e2eProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// awaitOutput waits for a line of stderr matching re and returns its
// submatches.
func (p *e2eProc) awaitOutput(re *regexp.Regexp, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
			return m, nil
		}
		if p.exited() {
			return nil, fmt.Errorf("%s exited:\n%s", p.name, p.stderr.String())
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: no output matching %s within %v:\n%s", p.name, re, timeout, p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logLines returns the JSON log records on stderr whose msg is msg.
func (p *e2eProc) logLines(msg string) []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(p.stderr.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// awaitLog waits for the first JSON log record whose msg is msg.
func (p *e2eProc) awaitLog(msg string, timeout time.Duration) (map[string]any, error) {
	deadline := time.Now().Add(timeout)
	for {
		if lines := p.logLines(msg); len(lines) > 0 {
			return lines[0], nil
		}
		if p.exited() {
			return nil, fmt.Errorf("%s exited before logging %q:\n%s", p.name, msg, p.stderr.String())
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: no %q log line within %v:\n%s", p.name, msg, timeout, p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// e2eCostMicros is what e2eConfig's default price charges for input and
// output tokens, in micro-dollars.
func e2eCostMicros(input, output int64) int64 { return input + 2*output }

// awaitRecord waits for tokenwarden's "settled" log record of the request
// whose x-request-id is id, the record operators reconcile against.
func (r *e2eRig) awaitRecord(t *testing.T, id string, timeout time.Duration) map[string]any {
	t.Helper()
	if id == "" {
		t.Fatal("no request id to find a record by")
	}
	deadline := time.Now().Add(timeout)
	for {
		for _, rec := range r.tokenwarden().logLines("settled") {
			if rec["request_id"] == id {
				return rec
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no settlement record of request %s within %v", id, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitSettled waits for tokenwarden's "settled" log record of the
// reservation an access log line names, and returns it. The record (debug
// level, as the rig runs) carries the basis and the charge of exactly this
// request, where a metric would mix in the parallel tests.
func (r *e2eRig) awaitSettled(t *testing.T, line map[string]any, timeout time.Duration) map[string]any {
	t.Helper()
	id, _ := line["tw_reservation"].(string)
	if id == "" {
		t.Fatalf("access log line names no reservation: %v", line)
	}
	deadline := time.Now().Add(timeout)
	for {
		for _, rec := range r.tokenwarden().logLines("settled") {
			if rec["reservation"] == id {
				return rec
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no settlement of reservation %s within %v of its access log line", id, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// e2eGet fetches a URL with a short timeout and returns status and body.
func e2eGet(url string) (int, string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// e2eRunID keeps tenants of one test binary run apart from another's
// (go test -count=2 reuses the rig, and with it the counters).
var (
	e2eRunID       = strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	e2eTenantCount atomic.Int64
)

// newE2ETenant returns a tenant no other test uses.
func newE2ETenant(t *testing.T) string {
	t.Helper()
	// Tenants also name access log tags (in a query string): keep to
	// characters that need no escaping.
	name := regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "-")
	return fmt.Sprintf("%s-%s-%d", name, e2eRunID, e2eTenantCount.Add(1))
}

// e2eCaller is an identity with a token minted for the shipped demo provider.
type e2eCaller struct {
	tenant, user, tier string
	token              string
}

// newE2ECaller returns a caller with a fresh tenant and user, and tier "standard"
// unless given.
func newE2ECaller(t *testing.T, tier ...string) e2eCaller {
	t.Helper()
	c := e2eCaller{tenant: newE2ETenant(t), tier: "standard"}
	c.user = "user-" + c.tenant
	if len(tier) > 0 {
		c.tier = tier[0]
	}
	c.token = mintDemoToken(t, map[string]any{"tenant": c.tenant, "sub": c.user, "tier": c.tier})
	return c
}

// e2eChat is an OpenAI chat completion body.
func e2eChat(t *testing.T, content string, maxTokens int, stream bool) []byte {
	t.Helper()
	req := map[string]any{
		"model":    "gpt-4o-mini",
		"messages": []any{map[string]any{"role": "user", "content": content}},
	}
	if maxTokens > 0 {
		req["max_tokens"] = maxTokens
	}
	if stream {
		req["stream"] = true
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// e2eResponse is what the client received.
type e2eResponse struct {
	status int
	header http.Header
	body   []byte
}

// send posts a chat completion to Envoy as c (no Authorization header when
// c.token is empty) with extra headers, reads the whole response and returns
// it. tag, when not empty, goes into the query string, where accessLogLine
// finds the request's access log line.
func (r *e2eRig) send(t *testing.T, c e2eCaller, body []byte, tag string, headers ...string) (*e2eResponse, error) {
	t.Helper()
	resp, err := r.open(t, t.Context(), c, body, tag, headers...)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the response body: %w", err)
	}
	return &e2eResponse{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// mustSend is send that fails the test on a transport error.
func (r *e2eRig) mustSend(t *testing.T, c e2eCaller, body []byte, tag string, headers ...string) *e2eResponse {
	t.Helper()
	resp, err := r.send(t, c, body, tag, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// open sends the request over HTTP/1.1 and returns the response with its body
// unread, on a connection of its own (closing the body mid-stream then closes
// the connection: a client that hangs up).
func (r *e2eRig) open(t *testing.T, ctx context.Context, c e2eCaller, body []byte, tag string, headers ...string) (*http.Response, error) {
	t.Helper()
	// A client that sends "Expect: 100-continue" (curl does for large
	// bodies) waits for Envoy's 100 before sending the body.
	return r.openWith(t, ctx, &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: 5 * time.Second}, c, body, tag, headers...)
}

// openH2 is open over cleartext HTTP/2 (h2c with prior knowledge): the
// request is one stream of a connection, and cancelling ctx resets that
// stream, not the connection.
func (r *e2eRig) openH2(t *testing.T, ctx context.Context, c e2eCaller, body []byte, tag string, headers ...string) (*http.Response, error) {
	t.Helper()
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	t.Cleanup(tr.CloseIdleConnections)
	return r.openWith(t, ctx, tr, c, body, tag, headers...)
}

// openWith sends the request with the given transport.
func (r *e2eRig) openWith(t *testing.T, ctx context.Context, tr *http.Transport, c e2eCaller, body []byte, tag string, headers ...string) (*http.Response, error) {
	t.Helper()
	return r.openCall(t, ctx, tr, c, body, tag, e2eCall{headers: headers})
}

// e2eIntHeader returns a response header as an integer, failing the test when it
// is missing or not one.
func e2eIntHeader(t *testing.T, resp *e2eResponse, name string) int64 {
	t.Helper()
	vs := resp.header.Values(name)
	if len(vs) != 1 {
		t.Fatalf("%s: got %q, want exactly one value (status %d, body %s)", name, vs, resp.status, resp.body)
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil {
		t.Fatalf("%s: got %q, want an integer", name, vs[0])
	}
	return n
}

// e2eWantStatus fails the test unless resp has the given status.
func e2eWantStatus(t *testing.T, resp *e2eResponse, want int) {
	t.Helper()
	if resp.status != want {
		t.Fatalf("status: got %d, want %d (headers %v, body %s)", resp.status, want, resp.header, resp.body)
	}
}

// e2eSSEData splits an SSE body into the payloads of its data lines.
func e2eSSEData(body []byte) []string {
	var out []string
	for line := range strings.Lines(string(body)) {
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}
