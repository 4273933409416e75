package extproc_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// TestDuplicateStreamEndSettlesOnce: a response told twice that it ended
// (a second end_of_stream after the last chunk) is settled once, on the
// first: the counter holds the reported usage, the store is asked once,
// and the second end gets a plain reply.
func TestDuplicateStreamEndSettlesOnce(t *testing.T) {
	tests := []struct {
		name     string
		body     []byte
		response []byte
		ctype    string
		want     int64
	}{
		{"json", smallChat, fixture(t, "openai/chat_response.json"), "application/json", 1163},
		{"sse", []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"Summarise TS 23.501."}]}`),
			fixture(t, "openai/chat_stream_usage.sse"), "text/event-stream", 224},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")},
				func(o *extproc.Options, a *accounting.Options) { o.Registerer, a.Registerer = reg, reg })
			resp := r.envoy.Do(t.Context(), chatRequest("a", tt.body), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", tt.ctype}},
					Chunks: split(tt.response, 64), DuplicateEnd: true}
			})
			wantStatus(t, resp, 200)
			if string(resp.Body) != string(tt.response) {
				t.Errorf("body reached the client altered: got %d bytes, want %d", len(resp.Body), len(tt.response))
			}
			r.envoy.Wait()
			if got := r.used(t, "tenant-tokens", tenantA); got != tt.want {
				t.Errorf("used: got %d, want the reported %d", got, tt.want)
			}
			for _, outcome := range []string{"ok", "no_record", "retried"} {
				want := 0.0
				if outcome == "ok" {
					want = 1
				}
				if got := gathered(t, reg, "tokenwarden_settlements_total", outcome); got != want {
					t.Errorf("tokenwarden_settlements_total{outcome=%q}: got %v, want %v", outcome, got, want)
				}
			}
			if got := gathered(t, reg, "tokenwarden_settlement_basis_total", "usage"); got != 1 {
				t.Errorf("tokenwarden_settlement_basis_total{basis=usage}: got %v, want 1", got)
			}
		})
	}
}

// TestClientGoneAfterResponseHeaders: a client that leaves once the
// response headers are answered, before any body, keeps the whole
// reservation charged: a non-streamed reply was generated in full before
// its headers, and a stream that showed none of its body may have
// generated any of it (as one reset before its headers, or one Envoy
// answers 502 for after an upstream reset: the server cannot tell them
// apart, and sees none of them).
func TestClientGoneAfterResponseHeaders(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		ctype string
		want  int64
	}{
		// 10 input tokens by the estimate (TestClientGoneBeforeResponse)
		// and the cap of 500.
		{"json", `{"model":"gpt-4o-mini","max_tokens":500,"messages":[{"role":"user","content":"hello there"}]}`, "application/json", 510},
		{"sse", `{"model":"gpt-4o-mini","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"hello there"}]}`, "text/event-stream", 510},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
			resp := r.envoy.Do(t.Context(), chatRequest("a", []byte(tt.body)), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", tt.ctype}},
					Chunks: [][]byte{[]byte("never sent")}, CutAfterHeaders: true}
			})
			if !resp.Cut || len(resp.Body) != 0 {
				t.Fatalf("got cut %v with %d body bytes, want a cut response without body", resp.Cut, len(resp.Body))
			}
			r.envoy.Wait()
			if got := r.used(t, "tenant-tokens", tenantA); got != tt.want {
				t.Errorf("used: got %d, want %d", got, tt.want)
			}
		})
	}
}
