package main

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// chatRequest holds the fields of an OpenAI chat completion request that change
// fakellm's answer.
type chatRequest struct {
	Model               string `json:"model"`
	Stream              bool   `json:"stream"`
	MaxTokens           *int   `json:"max_tokens"`
	MaxCompletionTokens *int   `json:"max_completion_tokens"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// rejectsMaxTokens reports whether OpenAI answers 400 to max_tokens for this
// model (reasoning models want max_completion_tokens), so tests notice when
// tokenwarden injects the wrong cap field.
func rejectsMaxTokens(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

// openAIError answers with OpenAI's error shape.
func openAIError(w http.ResponseWriter, status int, msg string) {
	typ, code := "invalid_request_error", any(nil)
	switch {
	case status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, controls{cutAfter: -1}, status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code},
	})
}

// setOpenAIRateLimitHeaders adds OpenAI's account-wide rate-limit headers.
func setOpenAIRateLimitHeaders(h http.Header) {
	h.Set("x-ratelimit-limit-requests", "10000")
	h.Set("x-ratelimit-limit-tokens", "30000000")
	h.Set("x-ratelimit-remaining-requests", "9999")
	h.Set("x-ratelimit-remaining-tokens", "29999000")
	h.Set("x-ratelimit-reset-requests", "6ms")
	h.Set("x-ratelimit-reset-tokens", "2ms")
}

// openAIUsage is the usage object of chat completions.
func openAIUsage(u usage) map[string]any {
	return map[string]any{
		"prompt_tokens":     u.input,
		"completion_tokens": u.output,
		"total_tokens":      u.input + u.output,
		"prompt_tokens_details": map[string]any{
			"cached_tokens": u.cached, "audio_tokens": 0,
		},
		"completion_tokens_details": map[string]any{
			"reasoning_tokens": 0, "audio_tokens": 0,
			"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
		},
	}
}

// serveChat answers POST /v1/chat/completions.
func serveChat(log *slog.Logger, w http.ResponseWriter, r *http.Request) {
	ctl, body, ok := readRequest(w, r, openAIError)
	if !ok {
		return
	}
	var req chatRequest
	if !decodeBody(w, body, &req, openAIError) {
		return
	}
	if req.Model == "" {
		openAIError(w, http.StatusBadRequest, "you must provide a model parameter")
		return
	}
	if req.MaxTokens != nil && rejectsMaxTokens(req.Model) {
		openAIError(w, http.StatusBadRequest, "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
		return
	}
	maxOut := 0
	switch {
	case req.MaxCompletionTokens != nil:
		maxOut = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		maxOut = *req.MaxTokens
	}
	u := ctl.plan(len(body), maxOut)
	w.Header().Set("x-request-id", newID("req_"))
	if ctl.rateLimitHeaders {
		setOpenAIRateLimitHeaders(w.Header())
	}
	if ctl.status != 0 {
		logRequest(log, r, "openai.chat", req.Model, req.Stream, ctl.status, u)
		openAIError(w, ctl.status, errorMessage(ctl.status))
		return
	}
	logRequest(log, r, "openai.chat", req.Model, req.Stream, http.StatusOK, u)

	finish := "stop"
	if u.truncated {
		finish = "length"
	}
	id, created := newID("chatcmpl-"), time.Now().Unix()
	if !req.Stream {
		if !sleep(r.Context(), ctl.chunkDelay) {
			return
		}
		writeJSON(w, ctl, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{
				"index":         0,
				"message":       map[string]any{"role": "assistant", "content": fullText(u.output), "refusal": nil, "annotations": []any{}},
				"logprobs":      nil,
				"finish_reason": finish,
			}},
			"usage":              openAIUsage(u),
			"service_tier":       "default",
			"system_fingerprint": "fp_fakellm",
		})
		return
	}

	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	chunk := func(choices []any, usage any) map[string]any {
		c := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"service_tier": "default", "system_fingerprint": "fp_fakellm", "choices": choices,
			"obfuscation": obfuscation(),
		}
		// With include_usage every chunk carries "usage": null and only the extra
		// last chunk the real figures; without it there is no usage key at all.
		if includeUsage {
			c["usage"] = usage
		}
		return c
	}
	choice := func(delta map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
	}

	s := startStream(w, r, ctl, sseLF)
	if !s.event("", chunk(choice(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil), nil)) {
		return
	}
	texts := chunkTexts(u.output, ctl.chunks)
	for _, t := range texts {
		s.cutHere(len(texts))
		if !s.content("", chunk(choice(map[string]any{"content": t}, nil), nil)) {
			return
		}
	}
	s.cutHere(len(texts))
	if !s.event("", chunk(choice(map[string]any{}, finish), nil)) {
		return
	}
	if includeUsage && !s.event("", chunk([]any{}, openAIUsage(u))) {
		return
	}
	s.event("", "[DONE]")
}

// obfuscation is the random-length padding OpenAI adds to stream chunks (against
// length side channels); parsers must ignore it.
func obfuscation() string { return newID("")[:1+rand.N(16)] }
