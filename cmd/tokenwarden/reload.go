package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/config"
	"github.com/tokenwarden/tokenwarden/extproc"
)

// configFile is where the server's config comes from: the -config file,
// or the embedded default when path is empty, with the -listen and
// -admin flags laid over it, at start and at every reload alike.
type configFile struct {
	path          string
	listen, admin string // the flags; "" leaves the file's
}

// read returns the file's bytes: the embedded default's without a path.
func (f *configFile) read() ([]byte, error) {
	if f.path == "" {
		return defaultConfig, nil
	}
	return os.ReadFile(f.path)
}

// parse parses data and lays the flags over it.
func (f *configFile) parse(data []byte) (*config.Config, error) {
	cfg, err := config.Parse(data)
	if err != nil {
		return nil, err
	}
	if f.listen != "" {
		cfg.Listen = f.listen
	}
	if f.admin != "" {
		cfg.Admin = f.admin
	}
	return cfg, nil
}

// load reads and parses the file, and returns its content's hash too.
func (f *configFile) load() (*config.Config, string, error) {
	data, err := f.read()
	if err != nil {
		return nil, "", err
	}
	cfg, err := f.parse(data)
	if err != nil {
		return nil, "", err
	}
	return cfg, contentHash(data), nil
}

// contentHash names a file's content in logs and metrics: the start of
// its SHA-256, in hex.
func contentHash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// configChanges lists the settings in which next differs from cur, by
// their keys in the file: live are those a running server applies,
// restart those that only a restart can (listening sockets, the admin
// handler, the log handler, the store and its connections). A setting
// the list does not name yet shows as "other settings" when it changed.
func configChanges(cur, next *config.Config) (live, restart []string) {
	diff := func(list *[]string, key string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			*list = append(*list, key)
		}
	}
	diff(&restart, "listen", cur.Listen, next.Listen)
	diff(&restart, "admin", cur.Admin, next.Admin)
	diff(&restart, "admin_pprof", cur.AdminPprof, next.AdminPprof)
	diff(&restart, "log.format", cur.Log.Text, next.Log.Text)
	// The exporter is made once, at start; the span attributes
	// (tracing.attributes, a server option) apply live.
	diff(&restart, "tracing", cur.Tracing, next.Tracing)
	// The region leases for the process's life (see newRegion).
	diff(&restart, "regions", cur.Regions, next.Regions)
	switch {
	case (cur.Store.Redis == nil) != (next.Store.Redis == nil):
		restart = append(restart, "store.type")
	default:
		diff(&restart, "store.redis", cur.Store.Redis, next.Store.Redis)
		diff(&restart, "store.redis.allow_eviction", cur.Store.AllowEviction, next.Store.AllowEviction)
	}

	diff(&live, "shutdown_grace", cur.ShutdownGrace, next.ShutdownGrace)
	diff(&live, "admin_token_file", [2]string{cur.AdminTokenFile, cur.AdminToken}, [2]string{next.AdminTokenFile, next.AdminToken})
	diff(&live, "log.level", cur.Log.Level, next.Log.Level)
	diff(&live, "reload.watch_interval", cur.Reload.WatchInterval, next.Reload.WatchInterval)
	diff(&live, "limits", cur.Accounting.Limits, next.Accounting.Limits)
	diff(&live, "models", cur.Accounting.Prices, next.Accounting.Prices)
	ca, na := cur.Accounting, next.Accounting
	ca.Limits, ca.Prices, na.Limits, na.Prices = nil, nil, nil, nil
	diff(&live, "other settings (accounting)", ca, na)

	c, n := cur.Server, next.Server
	diff(&live, "identity", c.Identity, n.Identity)
	diff(&live, "estimation", []any{cur.Tokenizer, c.DefaultOutputCap, c.InjectOutputCap, c.InjectStreamUsage},
		[]any{next.Tokenizer, n.DefaultOutputCap, n.InjectOutputCap, n.InjectStreamUsage})
	diff(&live, "settlement", []any{c.HiddenReasoningModels, c.RefuseBackground}, []any{n.HiddenReasoningModels, n.RefuseBackground})
	diff(&live, "azure.deployments", c.AzureDeployments, n.AzureDeployments)
	diff(&live, "service_tiers", c.ServiceTierFactors, n.ServiceTierFactors)
	diff(&live, "rate_limit_headers", []any{c.IETFRateLimitHeaders, c.NoAnthropicRateLimitHeaders, c.ShouldRetryMax},
		[]any{n.IETFRateLimitHeaders, n.NoAnthropicRateLimitHeaders, n.ShouldRetryMax})
	diff(&live, "strip_accept_encoding", c.StripAcceptEncoding, n.StripAcceptEncoding)
	diff(&live, "request_bytes", c.RequestBytes, n.RequestBytes)
	// What is left of the server options: those named above cleared,
	// and the counter, which the estimation section builds.
	for _, o := range []*extproc.Options{&c, &n} {
		o.Identity, o.DefaultOutputCap, o.InjectOutputCap, o.InjectStreamUsage = extproc.Identity{}, 0, false, false
		o.HiddenReasoningModels, o.RefuseBackground, o.AzureDeployments, o.ServiceTierFactors = nil, false, nil, nil
		o.IETFRateLimitHeaders, o.NoAnthropicRateLimitHeaders, o.StripAcceptEncoding = false, false, false
		o.ShouldRetryMax = 0
		o.RequestBytes = extproc.RequestBytes{}
		o.Counter = nil
	}
	diff(&live, "other settings", c, n)
	return live, restart
}

// restartOnly names the settings configChanges puts in restart, for
// people.
const restartOnly = "listen, admin, admin_pprof, log.format, store, regions and tracing's exporter"

// reloadSummary says, for check-config, how a server on cfg reloads it.
func reloadSummary(cfg *config.Config) string {
	when := "on SIGHUP only (reload.watch_interval off)"
	if d := cfg.Reload.WatchInterval; d > 0 {
		when = fmt.Sprintf("on SIGHUP, and when the file's content changes (checked every %s)", humanWindow(d))
	}
	return "reload (with -config): " + when + "; a change of " + restartOnly + " needs a restart"
}

// Reload outcomes, the values of tokenwarden_config_reloads_total's
// outcome label.
const (
	reloadApplied = "applied"
	reloadInvalid = "invalid"
	reloadRefused = "refused"
)

// reloadMetrics are the reloader's collectors.
type reloadMetrics struct {
	reloads     *prometheus.CounterVec
	successful  prometheus.Gauge
	lastSuccess prometheus.Gauge
	info        *prometheus.GaugeVec
}

func newReloadMetrics(reg prometheus.Registerer) *reloadMetrics {
	m := &reloadMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenwarden_config_reloads_total",
			Help: "Config reloads (on SIGHUP or a change of the file) by outcome: applied, invalid (the file could not be read or is not a valid config), refused (it changes a setting that applies only at a restart). The config in force stays on anything but applied.",
		}, []string{"outcome"}),
		successful: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tokenwarden_config_last_reload_successful",
			Help: "1 if the last config reload was applied (or none was tried since start), 0 if it was invalid or refused.",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tokenwarden_config_last_reload_success_timestamp_seconds",
			Help: "When the config in force was loaded: at start, or at the last applied reload (Unix seconds).",
		}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tokenwarden_config_info",
			Help: "The config in force, by the start of its file's SHA-256: compare replicas with count by (sha256).",
		}, []string{"sha256"}),
	}
	for _, o := range []string{reloadApplied, reloadInvalid, reloadRefused} {
		m.reloads.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.reloads, m.successful, m.lastSuccess, m.info)
	}
	return m
}

// reloader applies a changed config to a running server: on SIGHUP, and
// when a watch of the file sees its content change. A new config is
// parsed and validated in full, compared with the one in force, and
// swapped in at once — limits and prices through the Limiter's
// Reconfigure, everything the server reads per request through its
// Reload — or refused whole. Streams that started before a swap finish
// under the config they started with.
type reloader struct {
	file    *configFile
	limiter *accounting.Limiter // the one serve made; every config reconfigures it
	srv     *extproc.Server
	level   *slog.LevelVar
	log     *slog.Logger
	m       *reloadMetrics
	// ticks, when set, stands in for the watch's ticker (tests): it is
	// read while the config in force asks for a watch.
	ticks <-chan time.Time
	// retain, when the server leases limits across regions, tells the
	// region the limits of each config applied, so that it gives back
	// the leases of those a reload removed.
	retain func([]accounting.Limit)

	mu  sync.Mutex
	cur *config.Config
	// live is the Limiter that applies cur: limiter, reconfigured.
	live *accounting.Limiter
	// seen is what the watch saw last: the file's content hash, or why
	// it could not be read. A file is tried once per change, so a bad
	// one is logged and counted once, not at every tick.
	seen string
}

func newReloader(file *configFile, cfg *config.Config, hash string, limiter *accounting.Limiter, srv *extproc.Server,
	level *slog.LevelVar, log *slog.Logger, reg prometheus.Registerer) *reloader {
	r := &reloader{file: file, limiter: limiter, srv: srv, level: level, log: log, m: newReloadMetrics(reg), cur: cfg, live: limiter, seen: hash}
	r.m.successful.Set(1)
	r.m.lastSuccess.SetToCurrentTime()
	r.m.info.WithLabelValues(hash).Set(1)
	return r
}

// current returns the config in force.
func (r *reloader) current() *config.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// state returns the config in force and the Limiter that applies it,
// for the admin usage API.
func (r *reloader) state() (*config.Config, *accounting.Limiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur, r.live
}

// watchInterval is how often the file is checked: never for the
// embedded default.
func (r *reloader) watchInterval() time.Duration {
	if r.file.path == "" {
		return 0
	}
	return r.current().Reload.WatchInterval
}

// run reloads on every value of hup and, while the config in force asks
// for a watch, checks the file at its interval, until ctx ends.
func (r *reloader) run(ctx context.Context, hup <-chan os.Signal) {
	var ticker *time.Ticker
	var every time.Duration
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	for {
		if want := r.watchInterval(); want != every {
			if ticker != nil {
				ticker.Stop()
				ticker = nil
			}
			if want > 0 && r.ticks == nil {
				ticker = time.NewTicker(want)
			}
			every = want
		}
		var ticks <-chan time.Time // nil: no watch
		switch {
		case every > 0 && r.ticks != nil:
			ticks = r.ticks
		case ticker != nil:
			ticks = ticker.C
		}
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reload()
		case <-ticks:
			r.check()
		}
	}
}

// reload reloads the file, changed or not: what SIGHUP does.
func (r *reloader) reload() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file.path == "" {
		r.count(reloadRefused)
		r.log.Error("config reload refused: the server runs on the embedded default config, which cannot change; start it with -config FILE to reload",
			"trigger", "signal")
		return reloadRefused
	}
	data, err := r.file.read()
	if err != nil {
		r.seen = "unreadable: " + err.Error()
		return r.invalid("signal", err)
	}
	r.seen = contentHash(data)
	return r.apply(data, r.seen, "signal")
}

// check reloads the file if its content changed since it was last seen:
// what the watch does at every tick. It compares content, not time
// stamps or inodes: a Kubernetes ConfigMap update swaps a symlink, and a
// copy can keep a time stamp. It returns "" when nothing changed.
func (r *reloader) check() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, err := r.file.read()
	if err != nil {
		seen := "unreadable: " + err.Error()
		if seen == r.seen {
			return ""
		}
		r.seen = seen
		return r.invalid("watch", err)
	}
	hash := contentHash(data)
	if hash == r.seen {
		return ""
	}
	r.seen = hash
	return r.apply(data, hash, "watch")
}

// apply makes data the config in force, or leaves the one in force.
// r.mu is held.
func (r *reloader) apply(data []byte, hash, trigger string) string {
	next, err := r.file.parse(data)
	if err != nil {
		return r.invalid(trigger, err)
	}
	// The exporter the server started with serves every config after
	// it (configChanges refuses a change of it).
	next.Server.TracerProvider = r.cur.Server.TracerProvider
	live, restart := configChanges(r.cur, next)
	if len(restart) > 0 {
		r.count(reloadRefused)
		r.log.Error("config reload refused: it changes settings that apply only at a restart; the config in force stays",
			"trigger", trigger, "sha256", hash, "fields", restart)
		return reloadRefused
	}
	ao := next.Accounting
	ao.Logger = r.log
	limiter, err := r.limiter.Reconfigure(ao)
	if err != nil {
		return r.invalid(trigger, err)
	}
	so := next.Server
	so.Limiter = limiter
	if err := r.srv.Reload(so); err != nil {
		return r.invalid(trigger, err)
	}
	r.level.Set(next.Log.Level)
	r.cur, r.live = next, limiter
	if r.retain != nil {
		r.retain(next.Accounting.Limits)
	}
	r.count(reloadApplied)
	r.m.lastSuccess.SetToCurrentTime()
	r.m.info.Reset()
	r.m.info.WithLabelValues(hash).Set(1)
	if live == nil {
		live = []string{}
	}
	r.log.Info("config reloaded", "trigger", trigger, "sha256", hash, "changed", live,
		"limits", len(next.Accounting.Limits))
	return reloadApplied
}

// invalid counts and logs a file that could not be read or parsed.
func (r *reloader) invalid(trigger string, err error) string {
	r.count(reloadInvalid)
	r.log.Error("config reload failed: the file is not a valid config; the config in force stays",
		"trigger", trigger, "err", fmt.Sprint(err))
	return reloadInvalid
}

func (r *reloader) count(outcome string) {
	r.m.reloads.WithLabelValues(outcome).Inc()
	if outcome == reloadApplied {
		r.m.successful.Set(1)
	} else {
		r.m.successful.Set(0)
	}
}
