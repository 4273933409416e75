package main

import (
	"cmp"
	"encoding/json"
	"strings"
	"testing"
)

const chatPath = "/v1/chat/completions"

// TestChatJSON covers non-streaming chat completions.
func TestChatJSON(t *testing.T) {
	srv := newTestServer(t)
	cases := []struct {
		name                       string
		body                       string
		headers                    map[string]string
		wantPrompt, wantCompletion int
		wantCached                 int
		wantFinish                 string
	}{
		{"defaults", `{"model":"gpt-4o-mini","messages":[]}`, nil, len(`{"model":"gpt-4o-mini","messages":[]}`) / 4, defaultOutputTokens, 0, "stop"},
		{"controlled", `{"model":"gpt-4o-mini"}`, map[string]string{hdrInputTokens: "120", hdrCachedTokens: "20", hdrOutputTokens: "9"}, 120, 9, 20, "stop"},
		{"max_completion_tokens caps", `{"model":"gpt-4o-mini","max_completion_tokens":5}`, map[string]string{hdrInputTokens: "1", hdrOutputTokens: "9"}, 1, 5, 0, "length"},
		{"max_tokens caps", `{"model":"gpt-4o-mini","max_tokens":3}`, map[string]string{hdrInputTokens: "1"}, 1, 3, 0, "length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, srv, chatPath, c.body, c.headers)
			if r.status != 200 {
				t.Fatalf("status got %d, want 200: %s", r.status, r.body)
			}
			m := decodeJSON(t, r.body)
			if m["object"] != "chat.completion" {
				t.Errorf("object got %v, want chat.completion", m["object"])
			}
			for _, f := range []struct {
				name      string
				got, want int
			}{
				{"prompt_tokens", num(t, m, "usage", "prompt_tokens"), c.wantPrompt},
				{"completion_tokens", num(t, m, "usage", "completion_tokens"), c.wantCompletion},
				{"total_tokens", num(t, m, "usage", "total_tokens"), c.wantPrompt + c.wantCompletion},
				{"cached_tokens", num(t, m, "usage", "prompt_tokens_details", "cached_tokens"), c.wantCached},
			} {
				if f.got != f.want {
					t.Errorf("%s got %d, want %d", f.name, f.got, f.want)
				}
			}
			choice := m["choices"].([]any)[0].(map[string]any)
			if choice["finish_reason"] != c.wantFinish {
				t.Errorf("finish_reason got %v, want %s", choice["finish_reason"], c.wantFinish)
			}
			if text := choice["message"].(map[string]any)["content"].(string); len(text) != 4*c.wantCompletion {
				t.Errorf("content is %d bytes, want %d (4 per token)", len(text), 4*c.wantCompletion)
			}
		})
	}
}

// chatChunks parses an OpenAI stream into its JSON chunks, checking it ends with
// data: [DONE].
func chatChunks(t *testing.T, body string) []map[string]any {
	t.Helper()
	evs := parseSSE(t, body)
	if len(evs) == 0 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream does not end with data: [DONE]: %q", body)
	}
	var chunks []map[string]any
	for _, ev := range evs[:len(evs)-1] {
		if ev.name != "" {
			t.Errorf("OpenAI streams are data-only, got event %q", ev.name)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
			t.Fatalf("chunk %q: %v", ev.data, err)
		}
		chunks = append(chunks, m)
	}
	return chunks
}

// TestChatStream covers streams with and without stream_options.include_usage.
func TestChatStream(t *testing.T) {
	srv := newTestServer(t)
	headers := map[string]string{hdrInputTokens: "50", hdrOutputTokens: "10", hdrChunks: "3"}

	t.Run("without include_usage no usage at all", func(t *testing.T) {
		r := call(t, srv, chatPath, `{"model":"m","stream":true}`, headers)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d content-type %q, want 200 text/event-stream", r.status, r.header.Get("Content-Type"))
		}
		chunks := chatChunks(t, r.body)
		var text strings.Builder
		for _, c := range chunks {
			if _, ok := c["usage"]; ok {
				t.Errorf("chunk has a usage key without include_usage: %v", c)
			}
			if c["object"] != "chat.completion.chunk" {
				t.Errorf("object got %v, want chat.completion.chunk", c["object"])
			}
			d := c["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
			if s, ok := d["content"].(string); ok {
				text.WriteString(s)
			}
		}
		// role chunk + 3 content chunks + finish chunk
		if len(chunks) != 5 {
			t.Errorf("got %d chunks, want 5 (role, 3 content, finish)", len(chunks))
		}
		if text.Len() != 40 {
			t.Errorf("streamed %d bytes of text, want 40", text.Len())
		}
		last := chunks[len(chunks)-1]["choices"].([]any)[0].(map[string]any)
		if last["finish_reason"] != "stop" {
			t.Errorf("finish_reason got %v, want stop", last["finish_reason"])
		}
	})

	t.Run("with include_usage a last usage chunk", func(t *testing.T) {
		r := call(t, srv, chatPath, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, headers)
		chunks := chatChunks(t, r.body)
		for _, c := range chunks[:len(chunks)-1] {
			if u, ok := c["usage"]; !ok || u != nil {
				t.Errorf("chunk before the last: usage got %v (present %v), want null", u, ok)
			}
		}
		last := chunks[len(chunks)-1]
		if choices := last["choices"].([]any); len(choices) != 0 {
			t.Errorf("usage chunk choices got %v, want []", choices)
		}
		if num(t, last, "usage", "prompt_tokens") != 50 || num(t, last, "usage", "completion_tokens") != 10 {
			t.Errorf("usage got %v, want 50 prompt, 10 completion", last["usage"])
		}
	})

	t.Run("cut after one chunk", func(t *testing.T) {
		h := map[string]string{hdrOutputTokens: "10", hdrChunks: "3", hdrCutAfter: "1"}
		r := call(t, srv, chatPath, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, h)
		if r.readErr == nil {
			t.Fatalf("body read cleanly, want the connection dropped: %q", r.body)
		}
		if strings.Contains(r.body, "[DONE]") || strings.Contains(r.body, `"prompt_tokens"`) {
			t.Errorf("cut stream carries usage or [DONE]: %q", r.body)
		}
		if n := strings.Count(r.body, `"content":"`); n != 2 { // role chunk's "" + 1 content chunk
			t.Errorf("got %d content deltas (role chunk included), want 2", n)
		}
	})
}

// TestChatErrors covers the error replies.
func TestChatErrors(t *testing.T) {
	srv := newTestServer(t)
	checkErrorStatus(t, srv, chatPath, `{"model":"m"}`, true, func(t *testing.T, status int, m map[string]any) {
		e, ok := m["error"].(map[string]any)
		if !ok {
			t.Fatalf("status %d: body %v, want {\"error\":{…}}", status, m)
		}
		for _, k := range []string{"message", "type", "param", "code"} {
			if _, ok := e[k]; !ok {
				t.Errorf("status %d: error has no %q: %v", status, k, e)
			}
		}
		if status == 429 && (e["type"] != "requests" || e["code"] != "rate_limit_exceeded") {
			t.Errorf("429: type %v code %v, want requests / rate_limit_exceeded", e["type"], e["code"])
		}
	})
	cases := []struct {
		name, body string
		headers    map[string]string
		wantStatus int
	}{
		{"invalid JSON", `{"model":`, nil, 400},
		{"no model", `{"messages":[]}`, nil, 400},
		{"max_tokens on a reasoning model", `{"model":"o3-mini","max_tokens":10}`, nil, 400},
		{"max_completion_tokens on a reasoning model", `{"model":"o3-mini","max_completion_tokens":10}`, nil, 200},
		{"bad control header", `{"model":"m"}`, map[string]string{hdrChunks: "zero"}, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if r := call(t, srv, chatPath, c.body, c.headers); r.status != c.wantStatus {
				t.Errorf("status got %d, want %d: %s", r.status, c.wantStatus, r.body)
			}
		})
	}
}

// TestChatRateLimitHeaders checks the provider's own x-ratelimit-* headers come
// only when asked for.
func TestChatRateLimitHeaders(t *testing.T) {
	srv := newTestServer(t)
	for _, stream := range []bool{false, true} {
		body := `{"model":"m"}`
		if stream {
			body = `{"model":"m","stream":true}`
		}
		with := call(t, srv, chatPath, body, map[string]string{hdrRateLimitHeaders: "true"})
		without := call(t, srv, chatPath, body, nil)
		for _, h := range []string{"x-ratelimit-limit-requests", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"} {
			if with.header.Get(h) == "" {
				t.Errorf("stream %v: %s missing when asked for", stream, h)
			}
			if without.header.Get(h) != "" {
				t.Errorf("stream %v: %s present when not asked for", stream, h)
			}
		}
	}
}

// TestChatRemainingFigures: the remaining figures a test sets are the
// ones the provider's headers state, on a completion and on a 429.
func TestChatRemainingFigures(t *testing.T) {
	srv := newTestServer(t)
	for _, status := range []string{"", "429"} {
		h := map[string]string{hdrRemainingTokens: "1234", hdrRemainingRequests: "0"}
		if status != "" {
			h[hdrStatus] = status
		}
		r := call(t, srv, chatPath, `{"model":"m"}`, h)
		if got := r.header.Get("x-ratelimit-remaining-tokens"); got != "1234" {
			t.Errorf("status %q: x-ratelimit-remaining-tokens %q, want 1234", status, got)
		}
		if got := r.header.Get("x-ratelimit-remaining-requests"); got != "0" {
			t.Errorf("status %q: x-ratelimit-remaining-requests %q, want 0", status, got)
		}
		if status == "429" && r.header.Get("retry-after") == "" {
			t.Error("a 429 without retry-after")
		}
	}
}

// TestRetryAfterControl: a 429 that x-fakellm-retry-after shapes states
// that wait, from OpenAI and Anthropic alike; without it, 1.
func TestRetryAfterControl(t *testing.T) {
	srv := newTestServer(t)
	for _, c := range []struct{ path, body string }{
		{chatPath, `{"model":"m"}`},
		{messagesPath, `{"model":"c","max_tokens":10}`},
	} {
		for _, want := range []string{"7", ""} {
			h := map[string]string{hdrStatus: "429"}
			if want != "" {
				h[hdrRetryAfter] = want
			}
			r := call(t, srv, c.path, c.body, h)
			if got := r.header.Get("retry-after"); got != cmp.Or(want, "1") {
				t.Errorf("%s, %s %q: retry-after %q, want %q", c.path, hdrRetryAfter, want, got, cmp.Or(want, "1"))
			}
		}
	}
}

// TestChatJSONCut checks a non-streaming answer can be cut half-way.
func TestChatJSONCut(t *testing.T) {
	srv := newTestServer(t)
	r := call(t, srv, chatPath, `{"model":"m"}`, map[string]string{hdrCutAfter: "0"})
	if r.readErr == nil {
		t.Fatalf("body read cleanly, want the connection dropped: %q", r.body)
	}
	if json.Valid([]byte(r.body)) {
		t.Errorf("cut body is complete JSON: %q", r.body)
	}
}

// TestAzureChat covers Azure OpenAI's deployment paths: the deployment is the
// model, the api-version query is required, and the answers carry Azure's
// content-filter results in the shapes of testdata/openai.
func TestAzureChat(t *testing.T) {
	srv := newTestServer(t)
	const path = "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21"
	headers := map[string]string{hdrInputTokens: "50", hdrOutputTokens: "10", hdrChunks: "3"}

	t.Run("json", func(t *testing.T) {
		r := call(t, srv, path, `{"model":"ignored","messages":[]}`, headers)
		if r.status != 200 {
			t.Fatalf("status got %d, want 200: %s", r.status, r.body)
		}
		m := decodeJSON(t, r.body)
		if m["model"] != "prod-4o" {
			t.Errorf("model got %v, want the deployment prod-4o", m["model"])
		}
		if _, ok := m["prompt_filter_results"].([]any); !ok {
			t.Errorf("no prompt_filter_results: %v", m)
		}
		choice := m["choices"].([]any)[0].(map[string]any)
		if _, ok := choice["content_filter_results"].(map[string]any); !ok {
			t.Errorf("choice has no content_filter_results: %v", choice)
		}
		if num(t, m, "usage", "prompt_tokens") != 50 || num(t, m, "usage", "completion_tokens") != 10 {
			t.Errorf("usage got %v, want 50 and 10", m["usage"])
		}
	})

	t.Run("stream", func(t *testing.T) {
		r := call(t, srv, path, `{"messages":[],"stream":true,"stream_options":{"include_usage":true}}`, headers)
		chunks := chatChunks(t, r.body)
		first := chunks[0]
		if choices := first["choices"].([]any); len(choices) != 0 || first["prompt_filter_results"] == nil {
			t.Errorf("first chunk got %v, want empty choices and prompt_filter_results", first)
		}
		if _, ok := first["usage"]; ok {
			t.Errorf("first chunk has a usage key: %v (it is not the usage chunk)", first)
		}
		var text strings.Builder
		var offsets int
		for _, c := range chunks[1:] {
			for _, ch := range c["choices"].([]any) {
				ch := ch.(map[string]any)
				if ch["content_filter_offsets"] != nil {
					offsets++
					if _, ok := ch["delta"]; ok {
						t.Errorf("content-filter chunk has a delta: %v", ch)
					}
				}
				if d, ok := ch["delta"].(map[string]any); ok {
					if s, ok := d["content"].(string); ok {
						text.WriteString(s)
					}
				}
			}
		}
		if offsets != 1 || text.Len() != 40 {
			t.Errorf("got %d content-filter chunks and %d bytes of text, want 1 and 40", offsets, text.Len())
		}
		last := chunks[len(chunks)-1]
		if num(t, last, "usage", "prompt_tokens") != 50 || num(t, last, "usage", "completion_tokens") != 10 {
			t.Errorf("last chunk usage got %v, want 50 and 10", last["usage"])
		}
	})

	t.Run("no api-version", func(t *testing.T) {
		r := call(t, srv, "/openai/deployments/prod-4o/chat/completions", `{"messages":[]}`, nil)
		if r.status != 404 {
			t.Fatalf("status got %d, want 404", r.status)
		}
		if e, _ := decodeJSON(t, r.body)["error"].(map[string]any); e["code"] != "404" || e["message"] != "Resource not found" {
			t.Errorf("body got %s, want Azure's Resource not found", r.body)
		}
	})

	t.Run("reasoning deployment name", func(t *testing.T) {
		r := call(t, srv, "/openai/deployments/o3-mini/chat/completions?api-version=2024-10-21", `{"model":"gpt-4o","max_tokens":5}`, nil)
		if r.status != 400 {
			t.Errorf("status got %d, want 400: the deployment, not the body's model, decides", r.status)
		}
	})
}
