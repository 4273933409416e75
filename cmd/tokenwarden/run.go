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
	"slices"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

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
		}
	}
	fs := flag.NewFlagSet("tokenwarden", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config `file` (default: the embedded example config)")
	listen := fs.String("listen", "", "ext_proc gRPC listen `address`, overriding the config's")
	admin := fs.String("admin", "", "admin HTTP listen `address`, overriding the config's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (subcommands: check-config, estimate)", fs.Arg(0))
	}
	s, err := loadSettings(*configPath)
	if err != nil {
		return err
	}
	if *listen != "" {
		s.Listen = *listen
	}
	if *admin != "" {
		s.Admin = *admin
	}
	return serve(ctx, s, stderr)
}

// loadSettings reads and validates a config file, or the embedded default.
func loadSettings(path string) (*Settings, error) {
	data := defaultConfig
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, err
		}
	}
	return ParseConfig(data)
}

func runCheckConfig(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config `file` to check")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *configPath == "" {
		return errors.New("check-config: -config FILE is required")
	}
	s, err := loadSettings(*configPath)
	if err != nil {
		return err
	}
	printSettings(stdout, s)
	return nil
}

func newLogger(s *Settings, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(s.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if s.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func newStore(s *Settings, log *slog.Logger) (accounting.Store, func() error, error) {
	if s.Store.Type == "memory" {
		return memstore.New(memstore.Options{}), func() error { return nil }, nil
	}
	// go-redis reports failed dials through a process-wide logger; send
	// them to ours (at debug: the store error metrics and /readyz are the
	// signal, a line per dial while Redis is down is noise).
	redis.SetLogger(redisLogger{log})
	st, err := redisstore.New(redisstore.Options{
		URL:                s.Store.URL,
		Timeout:            s.Store.Timeout,
		PoolSize:           s.Store.PoolSize,
		MinIdleConns:       s.Store.MinIdleConns,
		HashTag:            s.Store.HashTag,
		ClusterAddrs:       s.Store.ClusterAddrs,
		SentinelMasterName: s.Store.Sentinel.MasterName,
		SentinelAddrs:      s.Store.Sentinel.Addrs,
		SentinelPassword:   s.Store.Sentinel.Password,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store.redis: %w", err)
	}
	return st, st.Close, nil
}

// serve runs the server until ctx is cancelled, then shuts down: new
// streams are refused, in-flight ones get s.Grace to finish, the rest are
// cut and settled, and settlements still retrying get a last chance.
func serve(ctx context.Context, s *Settings, stderr io.Writer) error {
	log := newLogger(s, stderr)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	store, closeStore, err := newStore(s, log)
	if err != nil {
		return err
	}
	defer closeStore()
	ready := &readiness{store: store, log: log}
	if rs, ok := store.(*redisstore.Store); ok {
		if err := checkEvictionAtStart(ctx, rs, s.Store.AllowEviction, log); err != nil {
			return err
		}
		if !s.Store.AllowEviction {
			ready.eviction = rs.CheckEviction
		}
	}
	limiter, err := accounting.New(accounting.Options{
		Store:        store,
		Limits:       s.Limits,
		Prices:       s.Prices,
		Logger:       log,
		Registerer:   reg,
	})
	if err != nil {
		return err
	}
	counter, err := newTokenCounter(s)
	if err != nil {
		return err
	}
	srv, err := extproc.NewServer(extproc.Options{
		Limiter:               limiter,
		Identity:              s.Identity,
		Counter:               counter,
		DefaultOutputCap:      s.OutputCap,
		InjectOutputCap:       s.InjectCap,
		InjectStreamUsage:     s.InjectUsage,
		StripAcceptEncoding:   s.StripEncoding,
		HiddenReasoningModels: s.HiddenReasoning,
		RefuseBackground:      s.RefuseBackground,
		AzureDeployments:      s.AzureDeployments,
		Logger:                log,
		Registerer:            reg,
	})
	if err != nil {
		return err
	}

	grpcLis, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	adminLis, err := net.Listen("tcp", s.Admin)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("admin: %w", err)
	}
	gs := grpc.NewServer(srv.ServerOptions()...)
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(extprocv3.ExternalProcessor_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)

	hsrv := &http.Server{Handler: adminHandler(reg, ready, s.AdminPprof), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(grpcLis) }()
	go func() {
		if err := hsrv.Serve(adminLis); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	log.Info("tokenwarden started",
		"listen", grpcLis.Addr().String(), "admin", adminLis.Addr().String(),
		"store", s.Store.Type, "limits", len(s.Limits))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		log.Error("server failed", "err", serveErr)
	}

	log.Info("shutting down", "grace", s.Grace.String())
	hs.Shutdown() // health checks now say NOT_SERVING
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(s.Grace):
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

// printSettings prints the effective limits, for check-config.
func printSettings(w io.Writer, s *Settings) {
	fmt.Fprintf(w, "config ok\nlisten %s, admin %s, store %s\n", s.Listen, s.Admin, s.Store.Type)
	if s.Store.Type == "redis" && s.Store.AllowEviction {
		fmt.Fprintln(w, "store.redis.allow_eviction: true: Redis's maxmemory-policy is not checked; a full Redis under any policy but noeviction resets budgets")
	}
	fmt.Fprintf(w, "estimation: tokenizer %s, %.2f chars/token, default output cap %d, inject cap %v, inject stream usage %v\n",
		s.Tokenizer, s.CharsPerToken, s.OutputCap, s.InjectCap, s.InjectUsage)
	reasoning := s.HiddenReasoning
	if reasoning == nil {
		reasoning = extproc.DefaultHiddenReasoningModels
	}
	background := "reserve (charged their whole reservation)"
	if s.RefuseBackground {
		background = "refuse (400)"
	}
	fmt.Fprintf(w, "settlement without a usage report: hidden reasoning models [%s] keep their output cap; background responses: %s\n",
		strings.Join(reasoning, ", "), background)
	if len(s.AzureDeployments) > 0 {
		names := make([]string, 0, len(s.AzureDeployments))
		for d := range s.AzureDeployments {
			names = append(names, d)
		}
		slices.Sort(names)
		for _, d := range names {
			fmt.Fprintf(w, "azure deployment %s serves model %s\n", d, s.AzureDeployments[d])
		}
	}
	var req []string
	for _, a := range s.Identity.Attributes {
		src := "header " + a.Header
		if a.Metadata != nil {
			src = fmt.Sprintf("metadata %s/%s/%s", a.Metadata.Namespace, a.Metadata.Key, strings.Join(a.Metadata.Path, "/"))
		}
		if a.HasDefault {
			src += fmt.Sprintf(" (default %q)", a.Default)
		}
		fmt.Fprintf(w, "identity %s from %s\n", a.Name, src)
	}
	req = append(req, s.Identity.Required...)
	fmt.Fprintf(w, "required: %s\n", strings.Join(req, ", "))
	fmt.Fprintf(w, "%d limits:\n", len(s.Limits))
	for _, l := range s.Limits {
		scope := "global"
		if len(l.Scope) > 0 {
			scope = "per " + strings.Join(l.Scope, "+")
		}
		window := l.Window.String()
		if l.Calendar == accounting.CalendarMonth {
			window = "calendar month"
		}
		line := fmt.Sprintf("  %-24s %s %s per %s, %s, %s", l.Name, formatLimit(l.Dimension, l.Limit), l.Dimension, window, scope, l.Algorithm)
		if l.Burst > 0 {
			line += fmt.Sprintf(" (burst %s)", formatLimit(l.Dimension, l.Burst))
		}
		if len(l.Match) > 0 {
			line += fmt.Sprintf(", when %v", l.Match)
		}
		line += ", on store error " + l.OnStoreError.String()
		fmt.Fprintln(w, line)
	}
}

func formatLimit(d accounting.Dimension, v int64) string {
	if d == accounting.Cost {
		return fmt.Sprintf("$%d.%06d", v/1e6, v%1e6)
	}
	return fmt.Sprint(v)
}

// redisLogger adapts go-redis's logger interface to slog.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

func newTokenCounter(s *Settings) (*tokenizer.Counter, error) {
	return tokenizer.New(s.Estimation)
}
