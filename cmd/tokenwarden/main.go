// Command tokenwarden is the ext_proc server that puts token-aware limits
// in front of paid LLM APIs.
//
//	tokenwarden [-config FILE] [-listen ADDR] [-admin ADDR]
//	tokenwarden check-config -config FILE
//	tokenwarden estimate [flags] [FILE]
//
// With no flags it runs on an embedded default config: memory store,
// ext_proc gRPC on 127.0.0.1:50051, admin HTTP on 127.0.0.1:9090.
//
// SIGTERM and SIGINT shut it down gracefully; SIGHUP reloads the -config
// file, which the server also watches for changes.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tokenwarden:", err)
		os.Exit(1)
	}
}
