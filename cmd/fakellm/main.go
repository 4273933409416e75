// Command fakellm is a mock LLM upstream for tokenwarden's demo and tests.
//
// It speaks OpenAI /v1/chat/completions and /v1/responses, Azure OpenAI
// /openai/deployments/{deployment}/chat/completions, Anthropic /v1/messages and
// Gemini /v1beta/models/{model}:generateContent and :streamGenerateContent, as
// JSON and as streams, in the providers' wire shapes. It reads request bodies as
// the providers do (exact keys, the last of duplicates; see body.go) and says
// what it read in x-fakellm-seen-* response headers. Every request can be
// steered with x-fakellm-* headers (token counts, absurd ones included,
// chunking, delays, error statuses, provider rate-limit headers, a connection
// dropped before the response or mid-stream); see controls.go.
//
// Usage:
//
//	fakellm [-listen ADDR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "fakellm:", err)
		}
		os.Exit(2)
	}
}

// options are fakellm's command-line settings.
type options struct {
	listen string
}

// parseFlags reads the command line. Errors and -h output go to stderr.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8081", "address to serve HTTP on (port 0 picks a free port)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return o, nil
}

// shutdownGrace bounds how long in-flight (possibly slow, streaming) responses may
// run on after the signal: fakellm is a test fixture, not something to drain.
const shutdownGrace = 2 * time.Second

// run serves until ctx is cancelled. It logs the bound address, so that a caller
// that asked for port 0 can find it.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ln, err := net.Listen("tcp", opts.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           newHandler(log),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listening", "addr", ln.Addr().String())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Streams still running after the grace period: cut them.
		srv.Close()
	}
	log.Info("stopped")
	return nil
}
