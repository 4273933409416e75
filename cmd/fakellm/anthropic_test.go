package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const messagesPath = "/v1/messages"

// TestMessagesJSON covers non-streaming Anthropic answers, where input_tokens
// excludes cache reads.
func TestMessagesJSON(t *testing.T) {
	srv := newTestServer(t)
	cases := []struct {
		name, body, output string
		wantOutput         int
		wantStop           string
	}{
		{"end_turn", `{"model":"claude","max_tokens":100}`, "12", 12, "end_turn"},
		{"max_tokens", `{"model":"claude","max_tokens":5}`, "12", 5, "max_tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, srv, messagesPath, c.body, map[string]string{hdrInputTokens: "100", hdrCachedTokens: "30", hdrOutputTokens: c.output})
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			m := decodeJSON(t, r.body)
			if m["type"] != "message" || m["stop_reason"] != c.wantStop {
				t.Errorf("type %v stop_reason %v, want message / %s", m["type"], m["stop_reason"], c.wantStop)
			}
			if num(t, m, "usage", "input_tokens") != 70 || num(t, m, "usage", "cache_read_input_tokens") != 30 ||
				num(t, m, "usage", "output_tokens") != c.wantOutput {
				t.Errorf("usage got %v, want input 70 + cache read 30, output %d", m["usage"], c.wantOutput)
			}
		})
	}
}

// TestMessagesStream checks the event sequence and that usage is reported as
// Anthropic does: input in message_start, cumulative output in message_delta.
func TestMessagesStream(t *testing.T) {
	srv := newTestServer(t)
	r := call(t, srv, messagesPath, `{"model":"claude","max_tokens":100,"stream":true}`,
		map[string]string{hdrInputTokens: "40", hdrOutputTokens: "9", hdrChunks: "3"})
	evs := parseSSE(t, r.body)
	var names []string
	var text strings.Builder
	for _, ev := range evs {
		names = append(names, ev.name)
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
			t.Fatal(err)
		}
		if m["type"] != ev.name {
			t.Errorf("event %s: data type %v, want the event name", ev.name, m["type"])
		}
		switch ev.name {
		case "message_start":
			if got := num(t, m, "message", "usage", "input_tokens"); got != 40 {
				t.Errorf("message_start input_tokens got %d, want 40", got)
			}
		case "content_block_delta":
			text.WriteString(m["delta"].(map[string]any)["text"].(string))
		case "message_delta":
			if got := num(t, m, "usage", "output_tokens"); got != 9 {
				t.Errorf("message_delta output_tokens got %d, want the cumulative 9", got)
			}
		}
	}
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
		"content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(names, want) {
		t.Errorf("events got %v, want %v", names, want)
	}
	if text.Len() != 36 {
		t.Errorf("streamed %d bytes of text, want 36", text.Len())
	}
}

// TestMessagesErrors covers Anthropic's error shape and its required max_tokens.
func TestMessagesErrors(t *testing.T) {
	srv := newTestServer(t)
	checkErrorStatus(t, srv, messagesPath, `{"model":"c","max_tokens":10}`, true, func(t *testing.T, status int, m map[string]any) {
		e, ok := m["error"].(map[string]any)
		if m["type"] != "error" || !ok || e["message"] == nil {
			t.Fatalf("status %d: body %v, want {type: error, error: {type, message}}", status, m)
		}
		if status == 429 && e["type"] != "rate_limit_error" {
			t.Errorf("429 error type %v, want rate_limit_error", e["type"])
		}
	})
	r := call(t, srv, messagesPath, `{"model":"c","max_tokens":10}`, map[string]string{hdrStatus: "529"})
	if e := decodeJSON(t, r.body)["error"].(map[string]any); r.status != 529 || e["type"] != "overloaded_error" {
		t.Errorf("529: status %d type %v, want 529 overloaded_error", r.status, e["type"])
	}
	for name, body := range map[string]string{
		"no max_tokens":   `{"model":"c"}`,
		"zero max_tokens": `{"model":"c","max_tokens":0}`,
		"no model":        `{"max_tokens":10}`,
	} {
		if r := call(t, srv, messagesPath, body, nil); r.status != 400 {
			t.Errorf("%s: status got %d, want 400", name, r.status)
		}
	}
}

// TestMessagesRateLimitHeaders checks Anthropic's own headers come when asked.
func TestMessagesRateLimitHeaders(t *testing.T) {
	srv := newTestServer(t)
	r := call(t, srv, messagesPath, `{"model":"c","max_tokens":10}`, map[string]string{hdrRateLimitHeaders: "true"})
	for _, h := range []string{"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"} {
		if r.header.Get(h) == "" {
			t.Errorf("%s missing", h)
		}
	}
}

// TestMessagesRemainingFigures: the remaining tokens a test sets are the
// combined figure, and bound the input and output ones.
func TestMessagesRemainingFigures(t *testing.T) {
	srv := newTestServer(t)
	r := call(t, srv, messagesPath, `{"model":"c","max_tokens":10}`, map[string]string{hdrRemainingTokens: "500000", hdrRemainingRequests: "7"})
	for h, want := range map[string]string{
		"anthropic-ratelimit-tokens-remaining":        "500000",
		"anthropic-ratelimit-input-tokens-remaining":  "500000",
		"anthropic-ratelimit-output-tokens-remaining": "400000",
		"anthropic-ratelimit-requests-remaining":      "7",
	} {
		if got := r.header.Get(h); got != want {
			t.Errorf("%s: got %q, want %q", h, got, want)
		}
	}
}

// TestMessagesCut checks a cut stream has no message_delta (so no final usage).
func TestMessagesCut(t *testing.T) {
	srv := newTestServer(t)
	r := call(t, srv, messagesPath, `{"model":"c","max_tokens":50,"stream":true}`, map[string]string{hdrCutAfter: "0"})
	if r.readErr == nil {
		t.Fatal("body read cleanly, want the connection dropped")
	}
	if !strings.Contains(r.body, "message_start") || strings.Contains(r.body, "content_block_delta") || strings.Contains(r.body, "message_delta") {
		t.Errorf("cut after 0 chunks: got %q, want message_start and no content or message_delta", r.body)
	}
}
