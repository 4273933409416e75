package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLoadAgainstNoop runs the noop server and a short load against it,
// measuring the server's (this process's) CPU.
func TestLoadAgainstNoop(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"noop", "-listen", addr}, io.Discard, io.Discard) }()
	defer func() {
		cancel()
		<-done
	}()

	var out bytes.Buffer
	var runErr error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		out.Reset()
		if runErr = run(t.Context(), []string{"-target", addr, "-c", "4", "-n", "300", "-pid", strconv.Itoa(os.Getpid()), "-scenario", "json"}, &out, io.Discard); runErr == nil {
			break
		}
	}
	if runErr != nil {
		t.Fatalf("loadgen: %v", runErr)
	}
	for _, want := range []string{"requests 300 in", "statuses: 200×300", "server cpu"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFlagsAreChecked(t *testing.T) {
	if err := run(t.Context(), []string{"-c", "0"}, io.Discard, io.Discard); err == nil {
		t.Error("-c 0 accepted")
	}
	if err := run(t.Context(), []string{"-scenario", "grpc"}, io.Discard, io.Discard); err == nil {
		t.Error("unknown scenario accepted")
	}
}
