package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// collector is an in-process OTLP trace collector: it keeps what it is
// sent.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.ResourceSpans
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, req.ResourceSpans...)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// serveGRPC runs c as an OTLP/gRPC collector and returns its address.
func (c *collector) serveGRPC(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, c)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// serveHTTP runs c as an OTLP/HTTP collector (protobuf bodies at
// /v1/traces) and returns its address.
func (c *collector) serveHTTP(t *testing.T) string {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("content-type") != "application/x-protobuf" ||
			proto.Unmarshal(body, req) != nil {
			http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
			return
		}
		resp, _ := c.Export(r.Context(), req)
		out, _ := proto.Marshal(resp)
		w.Header().Set("content-type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(hs.Close)
	return strings.TrimPrefix(hs.URL, "http://")
}

// received returns the spans the collector was sent by name, with the
// service.name of their resource.
func (c *collector) received() (map[string]*tracepb.Span, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*tracepb.Span{}
	service := ""
	for _, rs := range c.spans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				out[s.Name] = s
			}
		}
	}
	return out, service
}

// TestTracingExport runs the binary with a tracing section against an
// in-process collector, for each protocol: a request's decision and
// settlement reach the collector in the request's trace, flushed when
// the server stops (the batcher's own delay is longer than the test).
func TestTracingExport(t *testing.T) {
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	for _, protocol := range []string{"grpc", "http"} {
		t.Run(protocol, func(t *testing.T) {
			c := &collector{}
			addr := c.serveGRPC
			if protocol == "http" {
				addr = c.serveHTTP
			}
			r := start(t, testConfig+"tracing: {otlp_endpoint: '"+addr(t)+"', protocol: "+protocol+", insecure: true}\n")
			envoy := envoytest.Connect(t, r.grpcAddr)
			resp := envoy.Do(t.Context(), envoytest.Request{
				Path: "/v1/chat/completions",
				Headers: [][2]string{{"x-tenant-id", "acme"}, {"content-type", "application/json"},
					{"traceparent", "00-" + traceID + "-" + spanID + "-01"}},
				Body: []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`),
			}, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "application/json"}},
					Chunks: [][]byte{[]byte(`{"usage":{"prompt_tokens":9,"completion_tokens":3}}`)}}
			})
			if resp.Status != 200 {
				t.Fatalf("request: got %d %s %v", resp.Status, resp.Body, resp.Err)
			}
			r.logs.await(t, "settled")
			r.stop(t)

			spans, service := c.received()
			if service != "tokenwarden" {
				t.Errorf("service.name: got %q, want tokenwarden", service)
			}
			for _, name := range []string{"tokenwarden.decision", "tokenwarden.settlement"} {
				s := spans[name]
				if s == nil {
					t.Errorf("the collector got no %s span (got %d spans)", name, len(spans))
					continue
				}
				if got := hex.EncodeToString(s.TraceId); got != traceID {
					t.Errorf("%s: trace ID: got %s, want %s", name, got, traceID)
				}
				if !bytes.Equal(s.ParentSpanId, must(hex.DecodeString(spanID))) {
					t.Errorf("%s: parent: got %x, want %s", name, s.ParentSpanId, spanID)
				}
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestCheckConfigTracing(t *testing.T) {
	tests := []struct {
		name    string
		section string
		want    string
	}{
		{"off", "", "tracing: off\n"},
		{"on", "tracing: {otlp_endpoint: 'otel:4317', sample_ratio: 0.1, attributes: [tenant]}\n",
			"tracing: OTLP/grpc to otel:4317 (TLS), spans of requests Envoy or the client sampled, and 10% of the rest; spans carry identity tenant\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "tokenwarden.yaml", testConfig+tt.section)
			var out bytes.Buffer
			if err := run(t.Context(), []string{"check-config", "-config", path}, nil, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("check-config output lacks %q:\n%s", tt.want, out.String())
			}
		})
	}
}
