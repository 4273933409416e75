// Command demo runs tokenwarden's local demo without Docker: Envoy, tokenwarden
// and fakellm (the mock LLM) on loopback, wired as in docker compose.
//
//	go run ./cmd/demo
//
// It builds tokenwarden and fakellm into a temporary directory, starts
//
//   - fakellm on 127.0.0.1:8081,
//   - tokenwarden on envoy/demo/tokenwarden.yaml (memory store; the free
//     tier may send 5 requests a minute): ext_proc on 127.0.0.1:50051,
//     /metrics on 127.0.0.1:9090,
//   - Envoy on the shipped envoy/envoy.yaml with its four addresses moved to
//     loopback: the listener on 127.0.0.1:10000, its admin on 127.0.0.1:9901,
//
// waits until Envoy reports tokenwarden healthy, prints the curl commands
// that reach the first 429, and on Ctrl-C (SIGINT or SIGTERM) stops all
// three. Envoy is $ENVOY_BIN, or envoy on PATH; .ci/install-envoy.sh installs
// Envoy 1.40 and prints its path. Run it from the repository (any directory
// inside it): it needs the go command and the repository's files.
//
// Flags move each address, e.g. when docker compose up already holds the
// ports:
//
//	demo [-listen ADDR] [-envoy-admin ADDR] [-tokenwarden ADDR]
//	     [-tokenwarden-admin ADDR] [-fakellm ADDR] [-envoy FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "demo:", err)
		}
		os.Exit(1)
	}
}

// options are the demo's command-line settings.
type options struct {
	addrs addrs
	envoy string // the Envoy binary; "" looks for one
}

// addrs are where the three processes listen.
type addrs struct {
	listen           string // Envoy's listener, where clients send requests
	envoyAdmin       string // Envoy's admin interface
	tokenwarden      string // tokenwarden's ext_proc gRPC
	tokenwardenAdmin string // tokenwarden's /metrics, /healthz, /readyz
	fakellm          string // the mock LLM
}

// all lists the addresses with the flag that sets each, in start order.
func (a addrs) all() []struct{ flag, addr string } {
	return []struct{ flag, addr string }{
		{"-fakellm", a.fakellm},
		{"-tokenwarden", a.tokenwarden},
		{"-tokenwarden-admin", a.tokenwardenAdmin},
		{"-listen", a.listen},
		{"-envoy-admin", a.envoyAdmin},
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.addrs.listen, "listen", "127.0.0.1:10000", "Envoy's listener `address`, where the curl commands go")
	fs.StringVar(&o.addrs.envoyAdmin, "envoy-admin", "127.0.0.1:9901", "Envoy's admin `address`")
	fs.StringVar(&o.addrs.tokenwarden, "tokenwarden", "127.0.0.1:50051", "tokenwarden's ext_proc gRPC `address`")
	fs.StringVar(&o.addrs.tokenwardenAdmin, "tokenwarden-admin", "127.0.0.1:9090", "tokenwarden's admin HTTP `address` (/metrics)")
	fs.StringVar(&o.addrs.fakellm, "fakellm", "127.0.0.1:8081", "fakellm's `address`")
	fs.StringVar(&o.envoy, "envoy", "", "Envoy binary `file` (default: $ENVOY_BIN, else envoy on PATH)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	seen := map[string]string{}
	for _, a := range o.addrs.all() {
		if err := checkLoopback(a.addr); err != nil {
			return options{}, fmt.Errorf("%s: %w", a.flag, err)
		}
		if other, dup := seen[a.addr]; dup {
			return options{}, fmt.Errorf("%s and %s are both %s", other, a.flag, a.addr)
		}
		seen[a.addr] = a.flag
	}
	return o, nil
}
