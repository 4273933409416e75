package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/config"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// baseConfig is the config the reload tests start from and vary.
const baseConfig = `listen: 127.0.0.1:50051
identity:
  attributes:
    tenant: {header: x-tenant-id}
  required: [tenant]
models: {default: {input: 1, output: 2}}
limits:
  - {name: tpm, dimension: tokens, scope: [tenant], algorithm: fixed_window, limit: 1000, window: 1h}
`

func parseConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	return c
}

func TestConfigChanges(t *testing.T) {
	replace := func(old, new string) string { return strings.Replace(baseConfig, old, new, 1) }
	redis := "store: {type: redis, redis: {url: 'redis://127.0.0.1:6379'}}\n"
	tests := []struct {
		name          string
		cur, next     string // cur "" is baseConfig
		live, restart []string
	}{
		{name: "same", next: baseConfig},
		{name: "limit", next: replace("limit: 1000", "limit: 2000"), live: []string{"limits"}},
		{name: "price", next: replace("input: 1", "input: 3"), live: []string{"models"}},
		{name: "identity", next: replace("x-tenant-id", "x-team-id"), live: []string{"identity"}},
		{name: "log level", next: baseConfig + "log: {level: debug}\n", live: []string{"log.level"}},
		{name: "shutdown grace", next: baseConfig + "shutdown_grace: 1s\n", live: []string{"shutdown_grace"}},
		{name: "watch interval", next: baseConfig + "reload: {watch_interval: off}\n", live: []string{"reload.watch_interval"}},
		{name: "estimation", next: baseConfig + "estimation: {chars_per_token: 3}\n", live: []string{"estimation"}},
		{name: "output cap", next: baseConfig + "estimation: {default_output_cap: 100}\n", live: []string{"estimation"}},
		{name: "settlement", next: baseConfig + "settlement: {background: refuse}\n", live: []string{"settlement"}},
		{name: "azure", next: baseConfig + "azure: {deployments: {d: gpt-4o}}\n", live: []string{"azure.deployments"}},
		{name: "service tiers", next: baseConfig + "service_tiers: {priority: 3}\n", live: []string{"service_tiers"}},
		{name: "rate-limit headers", next: baseConfig + "rate_limit_headers: {ietf: true}\n", live: []string{"rate_limit_headers"}},
		{name: "retry hint", next: baseConfig + "rate_limit_headers: {should_retry_max: 5m}\n", live: []string{"rate_limit_headers"}},
		{name: "strip accept-encoding", next: baseConfig + "strip_accept_encoding: true\n", live: []string{"strip_accept_encoding"}},
		{name: "request bytes", next: baseConfig + "request_bytes: {in_flight: 512MiB}\n", live: []string{"request_bytes"}},
		{name: "listen", next: replace("127.0.0.1:50051", "0.0.0.0:50051"), restart: []string{"listen"}},
		{name: "admin", next: baseConfig + "admin: 127.0.0.1:9999\n", restart: []string{"admin"}},
		{name: "pprof", next: baseConfig + "admin_pprof: true\n", restart: []string{"admin_pprof"}},
		{name: "log format", next: baseConfig + "log: {format: text}\n", restart: []string{"log.format"}},
		{name: "store type", next: baseConfig + redis, restart: []string{"store.type"}},
		{name: "redis url", cur: baseConfig + redis, next: baseConfig + strings.Replace(redis, "6379", "6380", 1),
			restart: []string{"store.redis"}},
		{name: "redis eviction", cur: baseConfig + redis,
			next: baseConfig + strings.Replace(redis, "6379'", "6379', allow_eviction: true", 1), restart: []string{"store.redis.allow_eviction"}},
		{name: "tracing on", next: baseConfig + "tracing: {otlp_endpoint: 'collector:4317'}\n", restart: []string{"tracing"}},
		{name: "tracing endpoint", cur: baseConfig + "tracing: {otlp_endpoint: 'collector:4317'}\n",
			next: baseConfig + "tracing: {otlp_endpoint: 'collector:4318', protocol: http}\n", restart: []string{"tracing"}},
		{name: "tracing attributes", cur: baseConfig + "tracing: {otlp_endpoint: 'collector:4317'}\n",
			next: baseConfig + "tracing: {otlp_endpoint: 'collector:4317', attributes: [tenant]}\n", live: []string{"other settings"}},
		{name: "live and restart", next: replace("limit: 1000", "limit: 5") + "admin_pprof: true\nlog: {level: warn}\n",
			live: []string{"log.level", "limits"}, restart: []string{"admin_pprof"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := tt.cur
			if cur == "" {
				cur = baseConfig
			}
			live, restart := configChanges(parseConfig(t, cur), parseConfig(t, tt.next))
			if !slices.Equal(live, tt.live) {
				t.Errorf("live changes: got %q, want %q", live, tt.live)
			}
			if !slices.Equal(restart, tt.restart) {
				t.Errorf("restart changes: got %q, want %q", restart, tt.restart)
			}
		})
	}
}

// reloadRig is a server on a config file, behind the test Envoy, with
// its reloader.
type reloadRig struct {
	r     *reloader
	envoy *envoytest.Envoy
	reg   *prometheus.Registry
	logs  *logSink
	store accounting.Store
	path  string
}

func newReloadRig(t *testing.T, yaml string, setUp ...func(*config.Config)) *reloadRig {
	t.Helper()
	rig := &reloadRig{path: filepath.Join(t.TempDir(), "tokenwarden.yaml"), reg: prometheus.NewRegistry(),
		logs: newLogSink(), store: memstore.New(memstore.Options{})}
	rig.write(t, yaml)
	file := &configFile{path: rig.path}
	cfg, hash, err := file.load()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range setUp {
		f(cfg)
	}
	level := new(slog.LevelVar)
	level.Set(cfg.Log.Level)
	log := newLogger(cfg.Log, level, rig.logs)
	srv, limiter, err := newServer(cfg, rig.store, log, rig.reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = limiter.Close(context.Background()) })
	rig.r = newReloader(file, cfg, hash, limiter, srv, level, log, rig.reg)
	rig.envoy = envoytest.Start(t, srv, srv.ServerOptions()...)
	return rig
}

func (rig *reloadRig) write(t testing.TB, yaml string) {
	t.Helper()
	// Replaced by a rename, as an editor or a ConfigMap update does.
	tmp := rig.path + ".new"
	if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, rig.path); err != nil {
		t.Fatal(err)
	}
}

// chat sends a small chat request for tenant acme, answered with 12
// tokens of usage.
func chat(ctx context.Context, e *envoytest.Envoy) *envoytest.Response {
	return e.Do(ctx, envoytest.Request{
		Path:    "/v1/chat/completions",
		Headers: [][2]string{{"x-tenant-id", "acme"}, {"content-type", "application/json"}},
		Body:    []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`),
	}, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "application/json"}},
			Chunks: [][]byte{[]byte(`{"usage":{"prompt_tokens":9,"completion_tokens":3}}`)}}
	})
}

// limitInForce returns the token limit a request is told about.
func (rig *reloadRig) limitInForce(t *testing.T) string {
	t.Helper()
	resp := chat(t.Context(), rig.envoy)
	if resp.Status != 200 {
		t.Fatalf("request: got %d %s %v, want 200", resp.Status, resp.Body, resp.Err)
	}
	return resp.Header.Get("x-ratelimit-limit-tokens")
}

// metric returns the value of the counter or gauge name whose labels
// include label (any, when "").
func (rig *reloadRig) metric(t *testing.T, name, label string) float64 {
	t.Helper()
	families, err := rig.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			ok := label == ""
			for _, lp := range m.GetLabel() {
				ok = ok || lp.GetValue() == label
			}
			if !ok {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

func (rig *reloadRig) wantReloads(t *testing.T, applied, invalid, refused float64, successful float64) {
	t.Helper()
	for _, c := range []struct {
		outcome string
		want    float64
	}{{reloadApplied, applied}, {reloadInvalid, invalid}, {reloadRefused, refused}} {
		if got := rig.metric(t, "tokenwarden_config_reloads_total", c.outcome); got != c.want {
			t.Errorf("reloads %s: got %v, want %v", c.outcome, got, c.want)
		}
	}
	if got := rig.metric(t, "tokenwarden_config_last_reload_successful", ""); got != successful {
		t.Errorf("last reload successful: got %v, want %v", got, successful)
	}
}

// TestReloadOnFileChange walks a file through the changes an operator
// makes, checking it as the watch does at each tick: a good change
// applies, a bad file or one that needs a restart leaves the config in
// force, each is counted once, and SIGHUP retries whatever the file
// holds.
func TestReloadOnFileChange(t *testing.T) {
	rig := newReloadRig(t, baseConfig)
	r := rig.r
	if got := rig.limitInForce(t); got != "1000" {
		t.Fatalf("limit at start: got %s, want 1000", got)
	}
	if got := r.check(); got != "" {
		t.Errorf("check of an unchanged file: got %q, want nothing", got)
	}
	rig.wantReloads(t, 0, 0, 0, 1)
	startHash := baseHash(t)
	if got := rig.metric(t, "tokenwarden_config_info", startHash); got != 1 {
		t.Errorf("config info for the start file: got %v, want 1", got)
	}

	steps := []struct {
		name      string
		yaml      string // "" removes the file
		sighup    bool   // reload as SIGHUP does, not as the watch
		want      string // the outcome; "" for no reload
		wantLimit string
		wantLog   string // the msg of the log line, when there is one
	}{
		{name: "limit raised", yaml: strings.Replace(baseConfig, "limit: 1000", "limit: 2000", 1) + "log: {level: debug}\n",
			want: reloadApplied, wantLimit: "2000", wantLog: "config reloaded"},
		{name: "not yaml", yaml: "limits: [\n", want: reloadInvalid, wantLimit: "2000", wantLog: "config reload failed: the file is not a valid config; the config in force stays"},
		{name: "unchanged bad file is not retried", yaml: "limits: [\n", want: "", wantLimit: "2000"},
		{name: "invalid limit", yaml: strings.Replace(baseConfig, "window: 1h", "window: soon", 1), want: reloadInvalid, wantLimit: "2000",
			wantLog: "config reload failed: the file is not a valid config; the config in force stays"},
		{name: "listen changed", yaml: strings.Replace(baseConfig, "127.0.0.1:50051", "127.0.0.1:50052", 1), want: reloadRefused, wantLimit: "2000",
			wantLog: "config reload refused: it changes settings that apply only at a restart; the config in force stays"},
		{name: "SIGHUP retries the same file", yaml: strings.Replace(baseConfig, "127.0.0.1:50051", "127.0.0.1:50052", 1), sighup: true,
			want: reloadRefused, wantLimit: "2000", wantLog: "config reload refused: it changes settings that apply only at a restart; the config in force stays"},
		{name: "file removed", yaml: "", want: reloadInvalid, wantLimit: "2000", wantLog: "config reload failed: the file is not a valid config; the config in force stays"},
		{name: "still removed", yaml: "", want: "", wantLimit: "2000"},
		{name: "back to the start", yaml: baseConfig, want: reloadApplied, wantLimit: "1000", wantLog: "config reloaded"},
	}
	counts := map[string]float64{}
	successful := 1.0
	for _, s := range steps {
		if s.yaml == "" {
			if err := os.Remove(rig.path); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		} else {
			rig.write(t, s.yaml)
		}
		var got string
		if s.sighup {
			got = r.reload()
		} else {
			got = r.check()
		}
		if got != s.want {
			t.Fatalf("%s: got outcome %q, want %q", s.name, got, s.want)
		}
		if s.want != "" {
			counts[s.want]++
		}
		if s.wantLog != "" {
			m := rig.logs.await(t, s.wantLog)
			if s.want == reloadRefused && !strings.Contains(fmt.Sprint(m["fields"]), "listen") {
				t.Errorf("%s: refusal names fields %v, want listen", s.name, m["fields"])
			}
		}
		if got := rig.limitInForce(t); got != s.wantLimit {
			t.Errorf("%s: limit in force: got %s, want %s", s.name, got, s.wantLimit)
		}
		switch s.want {
		case reloadApplied:
			successful = 1
		case reloadInvalid, reloadRefused:
			successful = 0
		}
		if t.Failed() {
			t.FailNow()
		}
		rig.wantReloads(t, counts[reloadApplied], counts[reloadInvalid], counts[reloadRefused], successful)
		if s.name == "limit raised" && r.level.Level() != slog.LevelDebug {
			t.Errorf("log level after a reload to debug: got %v", r.level.Level())
		}
	}
	if got := rig.metric(t, "tokenwarden_config_info", startHash); got != 1 {
		t.Errorf("config info back at the start file: got %v, want 1", got)
	}
}

func baseHash(t *testing.T) string {
	t.Helper()
	return contentHash([]byte(baseConfig))
}

// TestReloadLoop: the reloader's loop reloads on a tick of the watch and
// on SIGHUP, and does not read the watch while the config turns it off.
func TestReloadLoop(t *testing.T) {
	rig := newReloadRig(t, baseConfig)
	ticks := make(chan time.Time, 1)
	rig.r.ticks = ticks
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		rig.r.run(ctx, hup)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })

	rig.write(t, strings.Replace(baseConfig, "limit: 1000", "limit: 2000", 1))
	ticks <- time.Now()
	if m := rig.logs.await(t, "config reloaded"); m["trigger"] != "watch" {
		t.Errorf("trigger: got %v, want watch", m["trigger"])
	}
	if got := rig.limitInForce(t); got != "2000" {
		t.Errorf("limit after a watch reload: got %s, want 2000", got)
	}

	// Turn the watch off: SIGHUP still reloads, and a tick is left unread.
	rig.write(t, strings.Replace(baseConfig, "limit: 1000", "limit: 3000", 1)+"reload: {watch_interval: off}\n")
	hup <- syscall.SIGHUP
	if m := rig.logs.await(t, "config reloaded"); m["trigger"] != "signal" {
		t.Errorf("trigger: got %v, want signal", m["trigger"])
	}
	ticks <- time.Now()
	rig.write(t, strings.Replace(baseConfig, "limit: 1000", "limit: 4000", 1)+"reload: {watch_interval: off}\n")
	hup <- syscall.SIGHUP
	rig.logs.await(t, "config reloaded")
	if len(ticks) != 1 {
		t.Errorf("ticks read with the watch off: got %d left, want 1", len(ticks))
	}
	if got := rig.limitInForce(t); got != "4000" {
		t.Errorf("limit after SIGHUP: got %s, want 4000", got)
	}
}

// TestReloadUnderLoad: requests run while the file flips between two
// configs and is reloaded after each flip. No request fails, and each
// settles once, on the limit it was admitted under: the limit both
// configs share holds all the usage, and the two limits one config each
// has hold it between them.
func TestReloadUnderLoad(t *testing.T) {
	cfg := func(only string) string {
		big := strings.Replace(baseConfig, "limit: 1000,", "limit: 1000000000,", 1)
		return strings.Replace(big, "limits:\n", "limits:\n  - {name: "+only+", dimension: tokens, scope: [tenant], algorithm: fixed_window, limit: 1000000000, window: 1h}\n", 1)
	}
	a, b := cfg("only-a"), cfg("only-b")
	rig := newReloadRig(t, a)
	const workers, perWorker, flips = 4, 25, 40

	var wg sync.WaitGroup
	errs := make(chan string, workers*perWorker)
	start := make(chan struct{})
	for range workers {
		wg.Go(func() {
			<-start
			for range perWorker {
				resp := chat(context.Background(), rig.envoy)
				if resp.Err != nil || resp.Status != 200 {
					errs <- fmt.Sprintf("status %d, err %v, body %s", resp.Status, resp.Err, resp.Body)
				}
			}
		})
	}
	close(start)
	for i := range flips {
		next := b
		if i%2 == 1 {
			next = a
		}
		rig.write(t, next)
		if got := rig.r.reload(); got != reloadApplied {
			t.Fatalf("reload %d: got %q, want applied", i, got)
		}
	}
	wg.Wait()
	rig.envoy.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("request failed: %s", e)
	}

	acme := accounting.Attributes{{Name: "tenant", Value: "acme"}}
	used := func(name string) int64 {
		l := accounting.Limit{Name: name, Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow,
			Limit: 1000000000, Window: time.Hour}
		res, err := rig.store.Reserve(context.Background(), accounting.ReserveRequest{ID: "probe",
			Items: []accounting.ReserveItem{{Counter: l.Counter(acme), Amount: 0}}})
		if err != nil {
			t.Fatal(err)
		}
		return l.Capacity() - res.States[0].Remaining
	}
	want := int64(workers * perWorker * 12)
	if got := used("tpm"); got != want {
		t.Errorf("tpm, in both configs: got %d tokens, want %d (12 for each request, once)", got, want)
	}
	if a, b := used("only-a"), used("only-b"); a+b != want {
		t.Errorf("only-a + only-b: got %d + %d, want %d", a, b, want)
	}
	if got := rig.metric(t, "tokenwarden_config_reloads_total", reloadApplied); got != flips {
		t.Errorf("applied reloads: got %v, want %d", got, flips)
	}
}

func TestCheckConfigSaysHowItReloads(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{name: "default", yaml: baseConfig,
			want: "reload (with -config): on SIGHUP, and when the file's content changes (checked every 10 seconds); a change of listen, admin, admin_pprof, log.format, store, regions and tracing's exporter needs a restart"},
		{name: "set", yaml: baseConfig + "reload: {watch_interval: 1m}\n", want: "(checked every 1 minute)"},
		{name: "off", yaml: baseConfig + "reload: {watch_interval: off}\n", want: "reload (with -config): on SIGHUP only (reload.watch_interval off);"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if err := run(t.Context(), []string{"check-config", "-config", path}, nil, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("check-config output lacks %q:\n%s", tt.want, out.String())
			}
		})
	}
}

// TestReloadKeepsTracing: the tracer the server started with serves the
// configs reloaded after it (the exporter is made once, at start).
func TestReloadKeepsTracing(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	rig := newReloadRig(t, baseConfig, func(c *config.Config) { c.Server.TracerProvider = tp })
	rig.write(t, strings.Replace(baseConfig, "limit: 1000", "limit: 2000", 1))
	if got := rig.r.check(); got != reloadApplied {
		t.Fatalf("reload: got %q, want %q", got, reloadApplied)
	}
	if got := rig.limitInForce(t); got != "2000" {
		t.Fatalf("limit after the reload: got %s, want 2000", got)
	}
	rig.envoy.Wait()
	names := map[string]int{}
	for _, s := range sr.Ended() {
		names[s.Name()]++
	}
	if names["tokenwarden.decision"] != 1 || names["tokenwarden.settlement"] != 1 {
		t.Errorf("spans of a request after a reload: got %v, want a decision and a settlement", names)
	}
}

// Each config applied tells the region its limits, so that it gives back
// the leases of limits a reload removed; a config refused tells it
// nothing.
func TestReloadTellsTheRegionItsLimits(t *testing.T) {
	rig := newReloadRig(t, baseConfig)
	var told [][]accounting.Limit
	rig.r.retain = func(l []accounting.Limit) { told = append(told, l) }
	rig.write(t, strings.Replace(baseConfig, "127.0.0.1:50051", "127.0.0.1:50052", 1))
	if got := rig.r.check(); got != reloadRefused {
		t.Fatalf("listen changed: got %q, want %q", got, reloadRefused)
	}
	rig.write(t, strings.Replace(baseConfig, "limit: 1000", "limit: 2000", 1))
	if got := rig.r.check(); got != reloadApplied {
		t.Fatalf("limit raised: got %q, want %q", got, reloadApplied)
	}
	if len(told) != 1 || len(told[0]) == 0 || told[0][0].Limit != 2000 {
		t.Errorf("after a refused and an applied reload: the region was told %v, want once, the applied config's limits (2000)", told)
	}
}
