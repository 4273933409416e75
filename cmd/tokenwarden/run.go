package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
	"github.com/tokenwarden/tokenwarden/config"
	"github.com/tokenwarden/tokenwarden/extproc"
)

// defaultConfig is what the server runs on without -config: one instance,
// memory store, a small example limit set. It belongs to the binary, not
// to the config package: it is a demonstration, not a default a library
// user should inherit.
//
//go:embed default.yaml
var defaultConfig []byte

// run is the whole program: main only adds signals and the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "check-config":
			return runCheckConfig(args[1:], stdout, stderr)
		case "estimate":
			return runEstimate(ctx, args[1:], stdin, stdout, stderr)
		case "version":
			fmt.Fprintln(stdout, versionString())
			return nil
		case "help":
			if len(args) > 1 && (args[1] == "check-config" || args[1] == "estimate") {
				return run(ctx, []string{args[1], "-h"}, stdin, stdout, stderr)
			}
		}
	}
	fs := flag.NewFlagSet("tokenwarden", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config `file` (default: the embedded example config)")
	listen := fs.String("listen", "", "ext_proc gRPC listen `address`, overriding the config's")
	admin := fs.String("admin", "", "admin HTTP listen `address`, overriding the config's")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		printUsage(fs.Output(), func(w io.Writer) { fs.SetOutput(w); fs.PrintDefaults() })
	}
	if len(args) > 0 && isHelp(args[0]) {
		// Help asked for is not an error: print it on stdout, exit 0.
		printUsage(stdout, func(w io.Writer) { fs.SetOutput(w); fs.PrintDefaults() })
		return nil
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Fprintln(stdout, versionString())
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (subcommands: check-config, estimate)", fs.Arg(0))
	}
	file := &configFile{path: *configPath, listen: *listen, admin: *admin}
	cfg, hash, err := file.load()
	if err != nil {
		return err
	}
	return serve(ctx, cfg, file, hash, stderr)
}

// loadConfig reads and validates a config file, or the embedded default.
func loadConfig(path string) (*config.Config, error) {
	cfg, _, err := (&configFile{path: path}).load()
	return cfg, err
}

// newLogger returns the logger l describes, at level: a reload may
// change the level, not the format.
func newLogger(l config.Log, level slog.Leveler, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if l.Text {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func newStore(cfg *config.Config, log *slog.Logger) (accounting.Store, func() error, error) {
	if cfg.Store.Redis == nil {
		return memstore.New(memstore.Options{}), func() error { return nil }, nil
	}
	// go-redis reports failed dials through a process-wide logger; send
	// them to ours (at debug: the store error metrics and /readyz are the
	// signal, a line per dial while Redis is down is noise).
	redis.SetLogger(redisLogger{log})
	st, err := redisstore.New(*cfg.Store.Redis)
	if err != nil {
		return nil, nil, fmt.Errorf("store.redis: %w", err)
	}
	return st, st.Close, nil
}

// serve runs the server until ctx is cancelled, then shuts down: new
// streams are refused, in-flight ones get cfg.ShutdownGrace to finish,
// the rest are cut and settled, and settlements still retrying get a
// last chance. Meanwhile SIGHUP, and a change of file (hash is the
// content cfg was read from), reload the config.
func serve(ctx context.Context, cfg *config.Config, file *configFile, hash string, stderr io.Writer) error {
	level := new(slog.LevelVar)
	level.Set(cfg.Log.Level)
	log := newLogger(cfg.Log, level, stderr)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Before the server derives its request bytes in flight from it.
	setGoMemoryLimit(log)

	store, closeStore, err := newStore(cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()
	ready := &readiness{store: store, log: log}
	if rs, ok := store.(*redisstore.Store); ok {
		if err := checkEvictionAtStart(ctx, rs, cfg.Store.AllowEviction, log); err != nil {
			return err
		}
		if !cfg.Store.AllowEviction {
			ready.eviction = rs.CheckEviction
		}
	}
	if cfg.Tracing != nil {
		tp, err := newTracerProvider(ctx, cfg.Tracing, log)
		if err != nil {
			return err
		}
		// Shut down last: the settlements of streams cut at shutdown
		// are spans too.
		defer shutdownTracing(tp, log)
		cfg.Server.TracerProvider = tp
	}
	withRegion := *cfg
	var retain func([]accounting.Limit)
	if cfg.Regions != nil {
		region, closeRegion, err := newRegion(cfg.Regions, store, log, reg)
		if err != nil {
			return err
		}
		defer closeRegion()
		withRegion.Accounting.Regional = region
		retain = region.Retain
	}
	srv, limiter, err := newServer(&withRegion, store, log, reg)
	if err != nil {
		return err
	}
	rl := newReloader(file, cfg, hash, limiter, srv, level, log, reg)
	rl.retain = retain
	// Registered before the server says it started: from then on a
	// SIGHUP reloads, and never takes the default action (exit).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	grpcLis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	adminLis, err := net.Listen("tcp", cfg.Admin)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("admin: %w", err)
	}
	gs := grpc.NewServer(srv.ServerOptions()...)
	hs := extproc.Register(gs, srv)

	hsrv := &http.Server{Handler: withUsageAPI(adminHandler(reg, ready, cfg.AdminPprof), newUsageAPI(rl.state, log, reg)), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(grpcLis) }()
	go func() {
		if err := hsrv.Serve(adminLis); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	storeType := "memory"
	if cfg.Store.Redis != nil {
		storeType = "redis"
	}
	reloadCtx, stopReloads := context.WithCancel(ctx)
	reloads := make(chan struct{})
	go func() {
		rl.run(reloadCtx, hup)
		close(reloads)
	}()
	inFlight, perPrincipal := srv.RequestBytesLimits()
	_, _, memory, memorySource := extproc.DefaultRequestBytes()
	log.Info("tokenwarden started",
		"listen", grpcLis.Addr().String(), "admin", adminLis.Addr().String(),
		"store", storeType, "limits", len(cfg.Accounting.Limits), "config_sha256", hash,
		"watch_interval", rl.watchInterval().String(),
		"request_bytes_in_flight", inFlight, "request_bytes_per_principal", perPrincipal,
		"memory_bytes", memory, "memory_from", memorySource)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		log.Error("server failed", "err", serveErr)
	}
	// No reload during the shutdown; it runs on the last config applied.
	stopReloads()
	<-reloads
	cfg = rl.current()

	log.Info("shutting down", "grace", cfg.ShutdownGrace.String())
	hs.Shutdown() // health checks now say NOT_SERVING
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(cfg.ShutdownGrace):
		// Cut what is left: the handlers settle their reservations as
		// the streams are cancelled, and Stop waits for them.
		gs.Stop()
		<-stopped
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := limiter.Close(sctx); err != nil {
		log.Error("shutdown", "err", err)
	}
	_ = hsrv.Shutdown(sctx)
	log.Info("stopped")
	return serveErr
}

// newServer builds the limiter and the ext_proc server cfg describes, on
// store: the one place the server and "tokenwarden estimate" get theirs
// from, so that estimate reads a request exactly as the server does.
// log and reg may be nil.
func newServer(cfg *config.Config, store accounting.Store, log *slog.Logger, reg prometheus.Registerer) (*extproc.Server, *accounting.Limiter, error) {
	ao := cfg.Accounting
	ao.Store, ao.Logger, ao.Registerer = store, log, reg
	limiter, err := accounting.New(ao)
	if err != nil {
		return nil, nil, err
	}
	so := cfg.Server
	so.Limiter, so.Logger, so.Registerer = limiter, log, reg
	srv, err := extproc.NewServer(so)
	if err != nil {
		return nil, nil, err
	}
	return srv, limiter, nil
}

// adminHandler serves /metrics, /healthz (the process is alive) and
// /readyz (the store answers, and a Redis store cannot evict counters).
func adminHandler(reg *prometheus.Registry, ready *readiness, withPprof bool) http.Handler {
	mux := http.NewServeMux()
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := ready.check(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// redisLogger adapts go-redis's logger interface to slog.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}
