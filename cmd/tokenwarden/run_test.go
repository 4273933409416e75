package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// logSink collects the server's JSON log lines and finds fields in them.
type logSink struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan map[string]any
	// msgs counts every record by msg, also those await skipped.
	msgs map[string]int
}

func newLogSink() *logSink {
	return &logSink{lines: make(chan map[string]any, 1000), msgs: map[string]int{}}
}

// count returns how many records so far had msg as their msg.
func (l *logSink) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msgs[msg]
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadBytes('\n')
		if err != nil {
			l.buf.Write(line) // keep the partial line
			break
		}
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			if msg, ok := m["msg"].(string); ok {
				l.msgs[msg]++
			}
			select {
			case l.lines <- m:
			default:
			}
		}
	}
	return len(p), nil
}

// await returns the first log record whose msg is msg.
func (l *logSink) await(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-l.lines:
			if m["msg"] == msg {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q log line within 10s", msg)
		}
	}
}

type running struct {
	grpcAddr, adminAddr string
	path                string // the config file
	logs                *logSink
	cancel              context.CancelFunc
	done                chan error
}

// start runs the server with config on free ports.
func start(t *testing.T, config string) *running {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokenwarden.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{path: path, logs: newLogSink(), cancel: cancel, done: make(chan error, 1)}
	go func() {
		r.done <- run(ctx, []string{"-config", path, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0"}, strings.NewReader(""), io.Discard, r.logs)
	}()
	started := r.logs.await(t, "tokenwarden started")
	r.grpcAddr, _ = started["listen"].(string)
	r.adminAddr, _ = started["admin"].(string)
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("run returned %v, want nil after a signal", err)
		}
		r.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within 10s of the signal")
	}
}

const testConfig = `
log: {level: debug}
shutdown_grace: 200ms
identity:
  attributes:
    tenant: {header: x-tenant-id}
  required: [tenant]
limits:
  - {name: tenant-tokens, dimension: tokens, scope: [tenant], algorithm: fixed_window, limit: 100000, window: 1h}
`

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRunServesAndStops(t *testing.T) {
	r := start(t, testConfig)

	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, "http://"+r.adminAddr+path); code != 200 {
			t.Errorf("%s: got %d %s, want 200", path, code, body)
		}
	}

	conn, err := grpc.NewClient(r.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{
		Service: extprocv3.ExternalProcessor_ServiceDesc.ServiceName})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health: got %v %v, want SERVING", hc, err)
	}

	envoy := envoytest.Connect(t, r.grpcAddr)
	resp := envoy.Do(t.Context(), envoytest.Request{
		Path:    "/v1/chat/completions",
		Headers: [][2]string{{"x-tenant-id", "acme"}, {"content-type", "application/json"}},
		Body:    []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`),
	}, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "application/json"}},
			Chunks: [][]byte{[]byte(`{"usage":{"prompt_tokens":9,"completion_tokens":3}}`)}}
	})
	if resp.Status != 200 || resp.Header.Get("x-ratelimit-limit-tokens") != "100000" {
		t.Errorf("request through the binary: got %d %v %s", resp.Status, resp.Header, resp.Body)
	}
	if resp.Header.Get("x-ratelimit-remaining-tokens") == "" {
		t.Errorf("no x-ratelimit-remaining-tokens")
	}
	r.logs.await(t, "settled")

	// A 4 MiB body: larger than gRPC's default message limit.
	big := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("a", 4<<20) + `"}],"max_tokens":10}`
	resp = envoy.Do(t.Context(), envoytest.Request{
		Path:    "/v1/chat/completions",
		Headers: [][2]string{{"x-tenant-id", "acme"}},
		Body:    []byte(big),
	}, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		return envoytest.UpstreamResponse{Status: 200}
	})
	if resp.Status != 429 || resp.Header.Get("x-should-retry") != "false" {
		t.Errorf("a 4 MiB body (over a million tokens): got %d %s %v, want a never-fits 429", resp.Status, resp.Body, resp.Err)
	}

	code, metrics := get(t, "http://"+r.adminAddr+"/metrics")
	for _, want := range []string{`tokenwarden_requests_total{api="openai.chat",outcome="admitted"} 1`, `tokenwarden_requests_total{api="openai.chat",outcome="never_fits"} 1`, "go_goroutines"} {
		if code != 200 || !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	r.stop(t)
}

// TestShutdownSettlesOpenStreams leaves a response streaming when the
// server is told to stop: after the grace period the stream is cut, and
// its reservation is settled before the process exits.
func TestShutdownSettlesOpenStreams(t *testing.T) {
	r := start(t, testConfig)
	conn, err := grpc.NewClient(r.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := extprocv3.NewExternalProcessorClient(conn).Process(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	hdrs := func(kv ...string) *corev3.HeaderMap {
		m := &corev3.HeaderMap{}
		for i := 0; i < len(kv); i += 2 {
			m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
		}
		return m
	}
	steps := []*extprocv3.ProcessingRequest{
		{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: hdrs(":method", "POST", ":path", "/v1/chat/completions", "x-tenant-id", "acme")}}},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{EndOfStream: true,
			Body: []byte(`{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)}}},
		{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
			Headers: hdrs(":status", "200", "content-type", "text/event-stream", "x-envoy-upstream-service-time", "3")}}},
		{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
			Body: []byte("data: {\"choices\":[{\"delta\":{\"content\":\"Hello there\"}}]}\n\n")}}},
	}
	for i, m := range steps {
		if err := stream.Send(m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
	}
	r.cancel()
	for {
		m := r.logs.await(t, "settled")
		if m["basis"] == "estimate" && m["complete"] == false {
			break
		}
	}
	r.logs.await(t, "stopped")
	if err := <-r.done; err != nil {
		t.Errorf("run: %v", err)
	}
	r.done <- nil
}

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte(testConfig), 0o600)
	os.WriteFile(bad, []byte(testConfig+"  - {name: x, dimension: tokens, limit: 1, window: eventually}\n"), 0o600)

	var out bytes.Buffer
	if err := run(t.Context(), []string{"check-config", "-config", good}, nil, &out, io.Discard); err != nil {
		t.Fatalf("check-config on a good file: %v", err)
	}
	if !strings.Contains(out.String(), "tenant-tokens") || !strings.Contains(out.String(), "100000 tokens per hour, per tenant, fixed_window") {
		t.Errorf("check-config output does not list the effective limit:\n%s", out.String())
	}
	err := run(t.Context(), []string{"check-config", "-config", bad}, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "limits[1].window") {
		t.Errorf("check-config on a bad file: got %v, want an error naming limits[1].window", err)
	}
	if err := run(t.Context(), []string{"-config", bad}, nil, io.Discard, io.Discard); err == nil {
		t.Errorf("the server started on a bad config")
	}
}

func TestRunRefusesStrayArguments(t *testing.T) {
	err := run(t.Context(), []string{"serve"}, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "serve") {
		t.Errorf("got %v, want an error naming the stray argument", err)
	}
}
