package extproc_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// TestFiftyMegabyteBody sends a 50 MB prompt: it is estimated (not
// waved through, not a crash) and, being larger than the limit, refused
// as a request that can never fit.
func TestFiftyMegabyteBody(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1_000_000, "tenant")})
	body := `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 50<<20/12) + `"}]}`
	resp := r.envoy.Do(t.Context(), chatRequest("a", []byte(body)), nil)
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-should-retry", "false")
	if got := r.used(t, "tenant-tokens", tenantA); got != 0 {
		t.Errorf("tokens reserved by a rejected request: %d", got)
	}
}

// TestEndlessSSELine streams a 10 MB SSE line (no newline) after a
// normal start, then ends the response: every byte reaches the client,
// the unterminated event is never parsed (the sse package pins that its
// buffer stays bounded), and the charge is the input estimate plus the
// output observed before it.
func TestEndlessSSELine(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1_000_000, "tenant")})
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
	line := bytes.Repeat([]byte("x"), 64<<10)
	resp := r.envoy.Do(t.Context(), chatRequest("a", body), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		chunks := [][]byte{[]byte("data: {\"choices\":[{\"delta\":{\"content\":\"hello\"}}]}\n\ndata: ")}
		for range 160 { // 10 MiB
			chunks = append(chunks, line)
		}
		return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "text/event-stream"}}, Chunks: chunks}
	})
	wantStatus(t, resp, 200)
	if n := len(resp.Body); n < 10<<20 {
		t.Errorf("client got %d bytes, want the whole 10 MiB stream", n)
	}
	used := r.used(t, "tenant-tokens", tenantA)
	if used <= 0 || used > 100+50 {
		t.Errorf("used: got %d, want the input estimate plus observed output, at most the reservation", used)
	}
	if md := resp.Metadata["tokenwarden"]; md["settled_on"] != "estimate" {
		t.Errorf("settled_on: got %v, want estimate (no usage was reported)", md["settled_on"])
	}
}
