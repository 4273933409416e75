package main

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// messagesRequest holds the fields of an Anthropic Messages request that change
// fakellm's answer.
type messagesRequest struct {
	Model     string `json:"model"`
	Stream    bool   `json:"stream"`
	MaxTokens *int   `json:"max_tokens"`
}

// anthropicError answers with Anthropic's error shape.
func anthropicError(w http.ResponseWriter, status int, msg string) {
	typ := "invalid_request_error"
	switch status {
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case http.StatusForbidden:
		typ = "permission_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
		if w.Header().Get("Retry-After") == "" {
			w.Header().Set("Retry-After", "1")
		}
	case 529:
		typ = "overloaded_error"
	default:
		if status >= 500 {
			typ = "api_error"
		}
	}
	writeJSON(w, controls{cutAfter: -1}, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": newID("req_"),
	})
}

// setAnthropicRateLimitHeaders adds Anthropic's account-wide rate-limit headers
// (resets are RFC 3339 times).
func setAnthropicRateLimitHeaders(h http.Header, ctl controls) {
	reset := time.Now().UTC().Add(time.Minute).Format(time.RFC3339)
	for _, kind := range []struct{ name, limit, remaining string }{
		{"requests", "4000", remaining(ctl.remainingRequests, "3999")},
		{"tokens", "2000000", remaining(ctl.remainingTokens, "1999000")},
		{"input-tokens", "1600000", atMost(ctl.remainingTokens, "1599000")},
		{"output-tokens", "400000", atMost(ctl.remainingTokens, "400000")},
	} {
		h.Set("anthropic-ratelimit-"+kind.name+"-limit", kind.limit)
		h.Set("anthropic-ratelimit-"+kind.name+"-remaining", kind.remaining)
		h.Set("anthropic-ratelimit-"+kind.name+"-reset", reset)
	}
}

// anthropicUsage maps u onto Anthropic's fields, where input_tokens excludes the
// cache reads.
func anthropicUsage(u usage, output int) map[string]any {
	return map[string]any{
		"input_tokens":                u.reportedUncachedInput(),
		"cache_creation_input_tokens": 0,
		"cache_read_input_tokens":     u.cached,
		"output_tokens":               u.reportedOutput(output),
	}
}

// serveMessages answers POST /v1/messages.
func serveMessages(log *slog.Logger, w http.ResponseWriter, r *http.Request) {
	ctl, body, ok := readRequest(w, r, anthropicError)
	if !ok {
		return
	}
	var req messagesRequest
	if !decodeBody(w, body, &req, anthropicError) {
		return
	}
	if req.Model == "" {
		anthropicError(w, http.StatusBadRequest, "model: Field required")
		return
	}
	// max_tokens is required by the real API, so a proxy that forgets to inject it
	// fails here as it would in production.
	if req.MaxTokens == nil {
		anthropicError(w, http.StatusBadRequest, "max_tokens: Field required")
		return
	}
	if *req.MaxTokens < 1 {
		anthropicError(w, http.StatusBadRequest, "max_tokens: Input should be greater than or equal to 1")
		return
	}
	setSeen(w.Header(), req.Model, req.MaxTokens)
	u := ctl.plan(len(body), *req.MaxTokens)
	w.Header().Set("request-id", newID("req_"))
	if ctl.rateLimitHeaders {
		setAnthropicRateLimitHeaders(w.Header(), ctl)
	}
	if ctl.status != 0 {
		logRequest(log, r, "anthropic.messages", req.Model, req.Stream, ctl.status, u)
		ctl.setRetryAfter(w)
		anthropicError(w, ctl.status, errorMessage(ctl.status))
		return
	}
	logRequest(log, r, "anthropic.messages", req.Model, req.Stream, http.StatusOK, u)

	stop := "end_turn"
	if u.truncated {
		stop = "max_tokens"
	}
	id := newID("msg_")
	if !req.Stream {
		if !sleep(r.Context(), ctl.chunkDelay) {
			return
		}
		writeJSON(w, ctl, http.StatusOK, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content":     []any{map[string]any{"type": "text", "text": fullText(u.output)}},
			"stop_reason": stop, "stop_sequence": nil,
			"usage": anthropicUsage(u, u.output),
		})
		return
	}

	s := startStream(w, r, ctl, sseLF)
	ev := func(send func(string, any) bool, typ string, fields map[string]any) bool {
		fields["type"] = typ
		return send(typ, fields)
	}
	// message_start carries the input counts and a token or so of output so far;
	// message_delta later carries the cumulative output.
	if !ev(s.event, "message_start", map[string]any{"message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "content": []any{}, "model": req.Model,
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(u, min(1, u.output)),
	}}) ||
		!ev(s.event, "content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}}) ||
		!ev(s.event, "ping", map[string]any{}) {
		return
	}
	texts := chunkTexts(u.output, ctl.chunks)
	for _, t := range texts {
		s.cutHere(len(texts))
		if !ev(s.content, "content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": t}}) {
			return
		}
	}
	s.cutHere(len(texts))
	_ = ev(s.event, "content_block_stop", map[string]any{"index": 0}) &&
		ev(s.event, "message_delta", map[string]any{
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": anthropicUsage(u, u.output),
		}) &&
		ev(s.event, "message_stop", map[string]any{})
}

// atMost returns def, or the figure a control set when it is lower: the
// input and output figures never exceed the combined one.
func atMost(set, def string) string {
	a, errA := strconv.ParseInt(set, 10, 64)
	b, _ := strconv.ParseInt(def, 10, 64)
	if errA == nil && a < b {
		return set
	}
	return def
}
