package extproc_test

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// TestAmbiguousUsageSettlesOnTheFallback: an upstream (or a proxy in
// front of it) that reports usage ambiguously — a stream whose usage
// member repeats with zeros, counts sent as strings, a JSON body whose
// usage repeats — cannot settle the request at zero: the reader reports
// no usage, and settlement falls back to the input estimate plus the
// output observed, as for a response without usage.
func TestAmbiguousUsageSettlesOnTheFallback(t *testing.T) {
	streamBody := []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`)
	const head = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini",`
	content := "data: " + head + `"choices":[{"index":0,"delta":{"content":"hello there, how are you"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	for _, tc := range []struct {
		name     string
		body     []byte
		upstream envoytest.Upstream
	}{
		{"a stream whose usage repeats with zeros", streamBody, sseUpstream([]byte(content+
			"data: "+head+`"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50},"usage":{"prompt_tokens":0,"completion_tokens":0}}`+"\n\n"+
			"data: [DONE]\n\n"), 64, 0)},
		{"a stream whose counts are strings", streamBody, sseUpstream([]byte(content+
			"data: "+head+`"choices":[],"usage":{"prompt_tokens":"100","completion_tokens":"50"}}`+"\n\n"+
			"data: [DONE]\n\n"), 64, 0)},
		{"a JSON body whose usage repeats with zeros", smallChat, jsonUpstream(200, []byte(
			`{"id":"x","object":"chat.completion","choices":[{"message":{"content":"hello there"}}],`+
				`"usage":{"prompt_tokens":100,"completion_tokens":50},"usage":{"prompt_tokens":0,"completion_tokens":0}}`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1_000_000, "tenant")})
			resp := r.envoy.Do(t.Context(), chatRequest("a", tc.body), tc.upstream)
			wantStatus(t, resp, 200)
			r.envoy.Wait()
			if md := resp.Metadata["tokenwarden"]; md["settled_on"] != "estimate" {
				t.Errorf("settled_on: got %v, want estimate (the usage was unreadable)", md["settled_on"])
			}
			if used := r.used(t, "tenant-tokens", tenantA); used <= 0 {
				t.Errorf("used: got %d, want the input estimate plus the output observed, not zero", used)
			}
		})
	}
}
