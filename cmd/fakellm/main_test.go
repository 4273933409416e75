package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"
)

// TestParseFlags covers the command line.
func TestParseFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    options
		wantErr bool
	}{
		{"default", nil, options{listen: "127.0.0.1:8081"}, false},
		{"listen", []string{"-listen", "0.0.0.0:9000"}, options{listen: "0.0.0.0:9000"}, false},
		{"later flag wins", []string{"-listen", "0.0.0.0:8081", "-listen", "127.0.0.1:0"}, options{listen: "127.0.0.1:0"}, false},
		{"unknown flag", []string{"-port", "1"}, options{}, true},
		{"stray argument", []string{"serve"}, options{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseFlags(c.args, io.Discard)
			if (err != nil) != c.wantErr {
				t.Fatalf("error got %v, want error %v", err, c.wantErr)
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
	if _, err := parseFlags([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: got %v, want flag.ErrHelp", err)
	}
}

// lockedBuffer is a bytes.Buffer shared by run's logger and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRun starts fakellm on a free port, finds it from the log, serves a request
// and stops when the context ends.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	logs := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-listen", "127.0.0.1:0"}, logs) }()

	addrRE := regexp.MustCompile(`msg=listening addr=(\S+)`)
	var addr string
	for deadline := time.Now().Add(5 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		cancel()
		t.Fatalf("no listening address logged:\n%s", logs.String())
	}
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(`{"model":"m"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status got %d, want 200", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run returned %v, want nil after cancel", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

// TestRunBadListen reports a listen error instead of hanging.
func TestRunBadListen(t *testing.T) {
	if err := run(context.Background(), []string{"-listen", "256.0.0.1:1"}, io.Discard); err == nil {
		t.Error("got nil, want a listen error")
	}
}
