package extproc_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// TestImplausibleUsageIsChargedAtItsBound: in every API, a usage report
// beyond what its request could have produced — input past the model's
// context window, output past the cap the provider was sent (times the
// choices), Gemini's thinking up to the window — is charged at that
// bound and counted in tokenwarden_implausible_usage_total{api}; a
// plausible report is charged as it is. An upstream that reports
// "prompt_tokens": 1e30 no longer charges 2^53 tokens.
func TestImplausibleUsageIsChargedAtItsBound(t *testing.T) {
	const (
		window     = 50_000  // settlement.context_windows.default
		miniWindow = 128_000 // settlement.context_windows.gpt-4o-mini
		defaultCap = 1000    // the rig's default_output_cap
	)
	sse := func(events ...string) string { return strings.Join(events, "\n\n") + "\n\n" }
	tests := []struct {
		name, api, path, request string
		contentType, response    string
		want                     int64 // the tokens charged
		implausible              bool
	}{
		{"openai chat", "openai.chat", "/v1/chat/completions",
			`{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "application/json",
			`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],` +
				`"usage":{"prompt_tokens":1e30,"completion_tokens":1e30,"total_tokens":2e30}}`, miniWindow + 100, true},
		{"openai chat, n choices", "openai.chat", "/v1/chat/completions",
			`{"model":"gpt-4o-mini","max_completion_tokens":100,"n":3,"messages":[{"role":"user","content":"hi"}]}`, "application/json",
			`{"object":"chat.completion","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":301}}`, 20 + 300, true},
		{"openai chat, streamed with the cap injected", "openai.chat", "/v1/chat/completions",
			`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "text/event-stream",
			sse(`data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}`,
				`data: {"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1e30,"completion_tokens":1e30}}`,
				`data: [DONE]`), miniWindow + defaultCap, true},
		{"openai chat, plausible", "openai.chat", "/v1/chat/completions",
			`{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "application/json",
			`{"object":"chat.completion","choices":[],"usage":{"prompt_tokens":127000,"completion_tokens":100}}`, 127000 + 100, false},
		{"openai completions, best_of", "openai.completions", "/v1/completions",
			`{"model":"gpt-3.5-turbo-instruct","prompt":"hi","max_tokens":10,"n":2,"best_of":3}`, "application/json",
			`{"object":"text_completion","choices":[{"text":"a","index":0}],"usage":{"prompt_tokens":1e30,"completion_tokens":1e30}}`, window + 30, true},
		{"openai responses", "openai.responses", "/v1/responses",
			`{"model":"o4-mini","input":"hi","max_output_tokens":300,"reasoning":{"effort":"high"}}`, "application/json",
			`{"object":"response","status":"completed","output":[],"usage":{"input_tokens":1e30,"output_tokens":1e30}}`, window + 300, true},
		{"openai embeddings", "openai.embeddings", "/v1/embeddings",
			`{"model":"text-embedding-3-small","input":"hi"}`, "application/json",
			`{"object":"list","data":[],"model":"text-embedding-3-small","usage":{"prompt_tokens":1e30,"total_tokens":1e30}}`, window, true},
		{"anthropic messages, thinking within max_tokens", "anthropic.messages", "/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`, "application/json",
			`{"type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1e30,"output_tokens":1e30}}`, window + 2048, true},
		{"anthropic messages, streamed", "anthropic.messages", "/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "text/event-stream",
			sse("event: message_start\n"+`data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":1e30,"output_tokens":1}}}`,
				"event: message_delta\n"+`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1e30}}`,
				"event: message_stop\n"+`data: {"type":"message_stop"}`), window + 200, true},
		{"gemini, thinking off", "gemini.generate_content", "/v1beta/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":64,"thinkingConfig":{"thinkingBudget":0}}}`, "application/json",
			`{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1e30,"candidatesTokenCount":1e30}}`, window + 64, true},
		{"gemini, thinking past the cap", "gemini.generate_content", "/v1beta/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":64,"thinkingConfig":{"thinkingBudget":512}}}`, "application/json",
			`{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":60,"thoughtsTokenCount":900}}`, 10 + 960, false},
		{"bedrock converse", "bedrock.converse", "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse",
			`{"messages":[{"role":"user","content":[{"text":"hi"}]}],"inferenceConfig":{"maxTokens":32}}`, "application/json",
			`{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":1e30,"outputTokens":1e30,"totalTokens":2e30}}`, window + 32, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1<<50, "tenant")},
				withServer(func(o *extproc.Options) {
					o.Registerer = reg
					o.ContextWindows = map[string]int64{"default": window, "gpt-4o-mini": miniWindow}
				}))
			upstream := func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", tc.contentType}},
					Chunks: [][]byte{[]byte(tc.response)}}
			}
			req := envoytest.Request{Path: tc.path, Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", "t"}},
				Body: []byte(tc.request)}
			wantStatus(t, r.envoy.Do(t.Context(), req, upstream), 200)
			r.envoy.Wait()
			if got := r.used(t, "tenant-tokens", accounting.Attributes{{Name: "tenant", Value: "t"}}); got != tc.want {
				t.Errorf("charged: got %d tokens, want %d", got, tc.want)
			}
			var want float64
			if tc.implausible {
				want = 1
			}
			if got := gathered(t, reg, "tokenwarden_implausible_usage_total", tc.api); got != want {
				t.Errorf("tokenwarden_implausible_usage_total{api=%q}: got %v, want %v", tc.api, got, want)
			}
		})
	}
}
