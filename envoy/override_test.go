package envoy

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// This file pins, on the real Envoy and the shipped envoy.yaml, what a
// request held by an on_exhausted wait relies on: a reply with only
// override_message_timeout extends the time Envoy waits for the reply to
// the request body past message_timeout (1 s), up to max_message_timeout
// (11 s), once per message; without it, or beyond the maximum, Envoy
// answers 504 when message_timeout passes. A stub ext_proc server plays
// tokenwarden holding a request: it answers the body after a delay, with
// or without the override first.

// holdingProcessor continues every message, but answers the request body
// only after hold, first sending each of overrides as a reply with only
// override_message_timeout. It records when the stream ended.
type holdingProcessor struct {
	extprocsvc.UnimplementedExternalProcessorServer
	hold      time.Duration
	overrides []time.Duration
	mu        sync.Mutex
	cancelled bool // the stream ended before the body's answer was sent
}

func (p *holdingProcessor) Process(stream extprocsvc.ExternalProcessor_ProcessServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		resp := &extprocsvc.ProcessingResponse{}
		switch req.GetRequest().(type) {
		case *extprocsvc.ProcessingRequest_RequestHeaders:
			resp.Response = &extprocsvc.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocsvc.HeadersResponse{}}
		case *extprocsvc.ProcessingRequest_RequestBody:
			for _, d := range p.overrides {
				if err := stream.Send(&extprocsvc.ProcessingResponse{OverrideMessageTimeout: durationpb.New(d)}); err != nil {
					return nil
				}
			}
			select {
			case <-time.After(p.hold):
			case <-stream.Context().Done():
				p.mu.Lock()
				p.cancelled = true
				p.mu.Unlock()
				return nil
			}
			resp.Response = &extprocsvc.ProcessingResponse_RequestBody{RequestBody: &extprocsvc.BodyResponse{}}
		case *extprocsvc.ProcessingRequest_ResponseHeaders:
			resp.Response = &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocsvc.HeadersResponse{}}
		case *extprocsvc.ProcessingRequest_ResponseBody:
			resp.Response = &extprocsvc.ProcessingResponse_ResponseBody{ResponseBody: &extprocsvc.BodyResponse{}}
		default:
			resp.Response = &extprocsvc.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocsvc.TrailersResponse{}}
		}
		if err := stream.Send(resp); err != nil {
			return nil
		}
	}
}

// envoyStats returns Envoy's counters whose names contain substr.
func envoyStats(t *testing.T, admin, substr string) map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/stats?filter=" + substr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
			out[k] = v
		}
	}
	return out
}

// TestEnvoyMessageTimeoutOverride: what the real Envoy does with a
// request body whose reply comes after message_timeout, by what the
// server sent first. The times are logged (the facts the docs state),
// not asserted: only the status is, and the hold (2 s) is far from
// both message_timeout (1 s) and the overrides.
func TestEnvoyMessageTimeoutOverride(t *testing.T) {
	noMax := func(doc map[string]any) {
		hcm := path(t, doc, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config")
		delete(path(t, named(t, path(t, hcm, "http_filters"), extProcFilter), "typed_config").(map[string]any), "max_message_timeout")
	}
	tests := []struct {
		name       string
		edits      []func(map[string]any)
		overrides  []time.Duration
		wantStatus int
		wantStat   string // the ext_proc override stat that counts it
	}{
		{"override within max_message_timeout", nil, []time.Duration{3 * time.Second}, http.StatusOK, "override_message_timeout_received"},
		{"no override", nil, nil, http.StatusGatewayTimeout, ""},
		{"override above max_message_timeout", nil, []time.Duration{12 * time.Second}, http.StatusGatewayTimeout, "override_message_timeout_ignored"},
		{"max_message_timeout unset", []func(map[string]any){noMax}, []time.Duration{3 * time.Second}, http.StatusGatewayTimeout, "override_message_timeout_ignored"},
		// Only the first override for a message counts: the second
		// would have covered the hold.
		{"a second override", nil, []time.Duration{1500 * time.Millisecond, 3 * time.Second}, http.StatusGatewayTimeout, "override_message_timeout_ignored"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if testing.Short() {
				t.Skip("starts Envoy")
			}
			envoyBinary(t)
			proc := &holdingProcessor{hold: 2 * time.Second, overrides: tt.overrides}
			gs := grpc.NewServer()
			extprocsvc.RegisterExternalProcessorServer(gs, proc)
			healthpb.RegisterHealthServer(gs, health.NewServer())
			gln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go gs.Serve(gln)
			t.Cleanup(gs.Stop)
			upstream := httptest.NewServer(&upstreamRecorder{})
			t.Cleanup(upstream.Close)
			a := addrs{listen: freeAddr(t), admin: freeAddr(t), tokenwarden: gln.Addr().String(), upstream: upstream.Listener.Addr().String()}
			startEnvoy(t, a, tt.edits...)

			start := time.Now()
			resp, err := post(t, a.listen, chatBody(100), map[string]string{})
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d after %v, want %d", resp.StatusCode, took, tt.wantStatus)
			}
			stats := envoyStats(t, a.admin, "override_message_timeout")
			t.Logf("overrides %v, server answers after %v: status %d after %v; %v", tt.overrides, proc.hold, resp.StatusCode, took.Round(10*time.Millisecond), stats)
			for name, v := range stats {
				counts := strings.HasSuffix(name, "."+tt.wantStat)
				if tt.wantStat != "" && counts && v == "0" {
					t.Errorf("%s: %s, want it counted", name, v)
				}
			}
			if tt.wantStatus == http.StatusGatewayTimeout {
				// Envoy resets the ext_proc stream with its 504: a held
				// request sees its context end, and leaves its queue.
				deadline := time.Now().Add(5 * time.Second)
				for {
					proc.mu.Lock()
					done := proc.cancelled
					proc.mu.Unlock()
					if done {
						break
					}
					if time.Now().After(deadline) {
						t.Error("the server's stream was not cancelled after Envoy's 504")
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}
