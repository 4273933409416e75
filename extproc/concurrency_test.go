package extproc_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// settleSignal is a memory store that reports every settlement, so that
// a test can wait for one without sleeping.
type settleSignal struct {
	*memstore.Store
	settled chan string
}

func (s *settleSignal) Settle(ctx context.Context, req accounting.SettleRequest) error {
	err := s.Store.Settle(ctx, req)
	s.settled <- req.ID
	return err
}

// inFlight is an upstream that holds its request until release is
// closed, then answers with resp; entered receives once it holds it.
type inFlight struct {
	entered chan struct{}
	release chan struct{}
	resp    envoytest.UpstreamResponse
}

func newInFlight(resp envoytest.UpstreamResponse) *inFlight {
	return &inFlight{entered: make(chan struct{}, 1), release: make(chan struct{}), resp: resp}
}

func (f *inFlight) upstream(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
	f.entered <- struct{}{}
	<-f.release
	return f.resp
}

// TestConcurrencyLimit: with a concurrent limit of 2, a third request in
// flight at once gets a 429 naming the limit, with a Retry-After of
// accounting.ConcurrentRetryAfter; as soon as one of the two ends —
// however it ends — the next is admitted while the other still runs.
func TestConcurrencyLimit(t *testing.T) {
	body := []byte(`{"model":"gpt-4o-mini","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	stream := fixture(t, "openai/chat_stream_usage.sse")
	chunks := [][]byte{stream[:len(stream)/2], stream[len(stream)/2:]}
	sse := [][2]string{{"content-type", "text/event-stream"}}
	tests := []struct {
		name string
		resp envoytest.UpstreamResponse
	}{
		{"completes", envoytest.UpstreamResponse{Status: 200, Headers: sse, Chunks: chunks}},
		{"cut stream", envoytest.UpstreamResponse{Status: 200, Headers: sse, Chunks: chunks, CutAfter: 1}},
		{"client reset before the response", envoytest.UpstreamResponse{CutBeforeHeaders: true}},
		{"upstream 500", envoytest.UpstreamResponse{Status: 500, Headers: [][2]string{{"content-type", "application/json"}},
			Chunks: [][]byte{[]byte(`{"error":{"message":"boom","type":"server_error"}}`)}}},
		{"upstream reset", envoytest.UpstreamResponse{EnvoyReply: "upstream_reset_before_response_started{connection_termination}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &settleSignal{Store: memstore.New(memstore.Options{}), settled: make(chan string, 16)}
			r := newRig(t, []accounting.Limit{{
				Name: "in-flight", Dimension: accounting.Concurrent, Algorithm: accounting.Leases,
				Scope: []string{"tenant"}, Limit: 2, Window: accounting.DefaultLease,
			}}, withStore(store))
			ctx := t.Context()
			var wg sync.WaitGroup
			start := func(f *inFlight) *envoytest.Response {
				var resp *envoytest.Response
				wg.Go(func() { resp = r.envoy.Do(ctx, chatRequest("a", body), f.upstream) })
				select {
				case <-f.entered:
				case <-time.After(10 * time.Second):
					t.Fatalf("request never reached the upstream")
				}
				return resp
			}
			ending := newInFlight(tt.resp)
			running := newInFlight(envoytest.UpstreamResponse{Status: 200, Headers: sse, Chunks: chunks})
			start(ending)
			start(running)

			// A third, while two are in flight; another tenant is apart.
			resp := r.envoy.Do(ctx, chatRequest("a", body), sseUpstream(stream, 64, 0))
			wantStatus(t, resp, 429)
			wantHeader(t, resp.Header, "x-tokenwarden-limit", "in-flight")
			wantHeader(t, resp.Header, "retry-after", "1")
			wantHeader(t, resp.Header, "x-ratelimit-limit-concurrent", "2")
			wantHeader(t, resp.Header, "x-ratelimit-remaining-concurrent", "0")
			if !strings.Contains(string(resp.Body), "in flight at once") {
				t.Errorf("body: got %s, want it to say the limit counts requests in flight", resp.Body)
			}
			if resp.Upstream != nil {
				t.Errorf("the rejected request reached the upstream")
			}
			wantStatus(t, r.envoy.Do(ctx, chatRequest("b", body), sseUpstream(stream, 64, 0)), 200)
			<-store.settled // tenant b's

			// One ends, the way the case says; its lease comes back.
			close(ending.release)
			select {
			case <-store.settled:
			case <-time.After(10 * time.Second):
				t.Fatalf("the request that ended never settled")
			}
			resp = r.envoy.Do(ctx, chatRequest("a", body), sseUpstream(stream, 64, 0))
			wantStatus(t, resp, 200)
			wantHeader(t, resp.Header, "x-ratelimit-remaining-concurrent", "0")
			<-store.settled

			// The other is still in flight, and holds its lease.
			third := newInFlight(envoytest.UpstreamResponse{Status: 200, Headers: sse, Chunks: chunks})
			start(third)
			wantStatus(t, r.envoy.Do(ctx, chatRequest("a", body), sseUpstream(stream, 64, 0)), 429)
			close(running.release)
			close(third.release)
			wg.Wait()
		})
	}
}
