package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// benchLimits are the three limits a benchmarked tokenwarden applies to
// every request, one per dimension, each scoped by tenant: large enough
// never to reject, so that every lifecycle is a whole one.
func benchLimits() []accounting.Limit {
	const never = 1 << 50 // within Redis's exact integers (2^53)
	return []accounting.Limit{
		{Name: "tenant-rpm", Dimension: accounting.Requests, Scope: []string{"tenant"},
			Algorithm: accounting.SlidingWindow, Limit: never, Window: time.Minute},
		{Name: "tenant-tpm", Dimension: accounting.Tokens, Scope: []string{"tenant"},
			Algorithm: accounting.FixedWindow, Limit: never, Window: time.Minute},
		{Name: "tenant-daily-spend", Dimension: accounting.Cost, Scope: []string{"tenant"},
			Algorithm: accounting.FixedWindow, Limit: never, Window: 24 * time.Hour},
	}
}

// grpcTuning are grpc-go server options to measure against the defaults.
// Zero values leave grpc-go's defaults.
type grpcTuning struct {
	readBuffer, writeBuffer int
	sharedWriteBuffer       bool
	streamWorkers           int
}

func (g *grpcTuning) flags(fs *flag.FlagSet) {
	fs.IntVar(&g.readBuffer, "grpc-read-buffer", 0, "grpc.ReadBufferSize in `bytes` (0: grpc-go's default)")
	fs.IntVar(&g.writeBuffer, "grpc-write-buffer", 0, "grpc.WriteBufferSize in `bytes` (0: grpc-go's default)")
	fs.BoolVar(&g.sharedWriteBuffer, "grpc-shared-write-buffer", false, "grpc.SharedWriteBuffer(true)")
	fs.IntVar(&g.streamWorkers, "grpc-stream-workers", 0, "grpc.NumStreamWorkers (0: a goroutine per stream)")
}

// args renders the options as flags for a child loadgen.
func (g *grpcTuning) args() []string {
	var a []string
	if g.readBuffer != 0 {
		a = append(a, fmt.Sprintf("-grpc-read-buffer=%d", g.readBuffer))
	}
	if g.writeBuffer != 0 {
		a = append(a, fmt.Sprintf("-grpc-write-buffer=%d", g.writeBuffer))
	}
	if g.sharedWriteBuffer {
		a = append(a, "-grpc-shared-write-buffer")
	}
	if g.streamWorkers != 0 {
		a = append(a, fmt.Sprintf("-grpc-stream-workers=%d", g.streamWorkers))
	}
	return a
}

func (g *grpcTuning) options() []grpc.ServerOption {
	var o []grpc.ServerOption
	if g.readBuffer != 0 {
		o = append(o, grpc.ReadBufferSize(g.readBuffer))
	}
	if g.writeBuffer != 0 {
		o = append(o, grpc.WriteBufferSize(g.writeBuffer))
	}
	if g.sharedWriteBuffer {
		o = append(o, grpc.SharedWriteBuffer(true))
	}
	if g.streamWorkers != 0 {
		o = append(o, grpc.NumStreamWorkers(uint32(g.streamWorkers)))
	}
	return o
}

// serve runs one server to measure, until ctx ends: "noop", the
// do-nothing ext_proc server, or tokenwarden on the "memory" or "redis"
// store with benchLimits. It prints "listening ADDRESS" on stdout once it
// accepts connections.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", "memory", "what to serve: noop, memory or redis")
	listen := fs.String("listen", "127.0.0.1:0", "listen `address`")
	redisURL := fs.String("redis", "", "Redis `URL` for -store redis")
	redisTimeout := fs.Duration("redis-timeout", 0, "the Redis store's Timeout (0: its default); raise it for a server slowed by valgrind")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `file`")
	memprofile := fs.String("memprofile", "", "write a profile of every allocation of the whole run to `file` (slows the server)")
	var tuning grpcTuning
	tuning.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var srv extprocv3.ExternalProcessorServer
	var opts []grpc.ServerOption
	switch *store {
	case "noop":
		srv, opts = envoytest.Noop{}, extproc.GRPCServerOptions()
	case "memory", "redis":
		tw, closeStore, err := tokenwarden(*store, *redisURL, *redisTimeout, stderr)
		if err != nil {
			return err
		}
		defer closeStore()
		srv, opts = tw, tw.ServerOptions()
	default:
		return fmt.Errorf("unknown -store %q (want noop, memory or redis)", *store)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			err = errors.Join(err, f.Close())
		}()
	}
	if *memprofile != "" {
		// Every allocation, so that bytes per lifecycle are exact rather
		// than sampled.
		runtime.MemProfileRate = 1
		defer func() {
			err = errors.Join(err, writeAllocs(*memprofile))
		}()
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	gs := grpc.NewServer(append(opts, tuning.options()...)...)
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	fmt.Fprintf(stdout, "listening %s\n", lis.Addr())
	go func() {
		<-ctx.Done()
		gs.Stop()
	}()
	return gs.Serve(lis)
}

// writeAllocs writes the profile of the allocations made so far to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	// The profile counts what the last completed collection saw.
	runtime.GC()
	return errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
}

// tokenwarden builds the server the way the tokenwarden binary does with
// its default estimation settings (approximate tokenizer, output cap and
// stream usage injected), metrics registered, logging at info.
func tokenwarden(store, redisURL string, redisTimeout time.Duration, stderr io.Writer) (*extproc.Server, func(), error) {
	var st accounting.Store
	closeStore := func() {}
	switch store {
	case "memory":
		st = memstore.New(memstore.Options{})
	case "redis":
		if redisURL == "" {
			return nil, nil, errors.New("-store redis needs -redis")
		}
		rs, err := redisstore.New(redisstore.Options{URL: redisURL, Timeout: redisTimeout})
		if err != nil {
			return nil, nil, err
		}
		st, closeStore = rs, func() { _ = rs.Close() }
	}
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	lim, err := accounting.New(accounting.Options{
		Store:  st,
		Limits: benchLimits(),
		Prices: accounting.Prices{
			"gpt-4o-mini": {Input: 0.15, CachedInput: 0.075, Output: 0.60},
			"default":     {Input: 5, Output: 15},
		},
		Logger:     log,
		Registerer: reg,
	})
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	srv, err := extproc.NewServer(extproc.Options{
		Limiter: lim,
		Identity: extproc.Identity{
			Attributes: []extproc.AttributeSource{{Name: "tenant", Header: "x-tenant-id"}, {Name: "user", Header: "x-user-id"}},
			Required:   []string{"tenant"},
		},
		DefaultOutputCap:  4096,
		InjectOutputCap:   true,
		InjectStreamUsage: true,
		Logger:            log,
		Registerer:        reg,
	})
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	return srv, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = lim.Close(ctx)
		closeStore()
	}, nil
}
