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
		if w.Header().Get("Retry-After") == "" {
			w.Header().Set("Retry-After", "1")
		}
	}
	writeJSON(w, controls{cutAfter: -1}, status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code},
	})
}

// setOpenAIRateLimitHeaders adds OpenAI's account-wide rate-limit headers.
func setOpenAIRateLimitHeaders(h http.Header, ctl controls) {
	h.Set("x-ratelimit-limit-requests", "10000")
	h.Set("x-ratelimit-limit-tokens", "30000000")
	h.Set("x-ratelimit-remaining-requests", remaining(ctl.remainingRequests, "9999"))
	h.Set("x-ratelimit-remaining-tokens", remaining(ctl.remainingTokens, "29999000"))
	h.Set("x-ratelimit-reset-requests", "6ms")
	h.Set("x-ratelimit-reset-tokens", "2ms")
}

// azureNotFound is Azure OpenAI's answer to a call without ?api-version=.
func azureNotFound(w http.ResponseWriter) {
	writeJSON(w, controls{cutAfter: -1}, http.StatusNotFound, map[string]any{
		"error": map[string]any{"code": "404", "message": "Resource not found"},
	})
}

// azurePromptFilterResults is Azure's content-filter verdict on the prompt.
func azurePromptFilterResults() []any {
	safe := map[string]any{"filtered": false, "severity": "safe"}
	return []any{map[string]any{"prompt_index": 0, "content_filter_results": map[string]any{
		"hate": safe, "self_harm": safe, "sexual": safe, "violence": safe,
		"jailbreak": map[string]any{"filtered": false, "detected": false},
	}}}
}

// azureContentFilterResults is Azure's content-filter verdict on output text.
func azureContentFilterResults() map[string]any {
	safe := map[string]any{"filtered": false, "severity": "safe"}
	return map[string]any{"hate": safe, "self_harm": safe, "sexual": safe, "violence": safe}
}

// openAIUsage is the usage object of chat completions.
func openAIUsage(u usage) map[string]any {
	return map[string]any{
		"prompt_tokens":     u.reportedInput(),
		"completion_tokens": u.reportedOutput(u.output),
		"total_tokens":      u.reportedTotal(u.output),
		"prompt_tokens_details": map[string]any{
			"cached_tokens": u.cached, "audio_tokens": 0,
		},
		"completion_tokens_details": map[string]any{
			"reasoning_tokens": 0, "audio_tokens": 0,
			"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
		},
	}
}

// serveChat answers POST /v1/chat/completions, and Azure OpenAI's
// /openai/deployments/{deployment}/chat/completions when deployment is set:
// there the deployment is the model (the body's "model" is ignored), the
// query must name an api-version, and responses carry Azure's content-filter
// results (a first stream chunk with empty choices among them).
func serveChat(log *slog.Logger, w http.ResponseWriter, r *http.Request, deployment string) {
	azure := deployment != ""
	if azure && r.URL.Query().Get("api-version") == "" {
		azureNotFound(w)
		return
	}
	ctl, body, ok := readRequest(w, r, openAIError)
	if !ok {
		return
	}
	var req chatRequest
	if !decodeBody(w, body, &req, openAIError) {
		return
	}
	if azure {
		req.Model = deployment
	}
	if req.Model == "" {
		openAIError(w, http.StatusBadRequest, "you must provide a model parameter")
		return
	}
	if req.MaxTokens != nil && rejectsMaxTokens(req.Model) {
		openAIError(w, http.StatusBadRequest, "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
		return
	}
	outputCap := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		outputCap = req.MaxCompletionTokens
	}
	maxOut := 0
	if outputCap != nil {
		maxOut = *outputCap
	}
	setSeen(w.Header(), req.Model, outputCap)
	u := ctl.plan(len(body), maxOut)
	w.Header().Set("x-request-id", newID("req_"))
	if ctl.rateLimitHeaders {
		setOpenAIRateLimitHeaders(w.Header(), ctl)
	}
	if ctl.status != 0 {
		logRequest(log, r, "openai.chat", req.Model, req.Stream, ctl.status, u)
		ctl.setRetryAfter(w)
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
		choice := map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": fullText(u.output), "refusal": nil, "annotations": []any{}},
			"logprobs":      nil,
			"finish_reason": finish,
		}
		resp := map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices":            []any{choice},
			"usage":              openAIUsage(u),
			"service_tier":       "default",
			"system_fingerprint": "fp_fakellm",
		}
		if azure {
			choice["content_filter_results"] = azureContentFilterResults()
			resp["prompt_filter_results"] = azurePromptFilterResults()
		}
		writeJSON(w, ctl, http.StatusOK, resp)
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
		c := map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}
		if azure {
			c["content_filter_results"] = map[string]any{}
			if delta["content"] != nil && delta["content"] != "" {
				c["content_filter_results"] = azureContentFilterResults()
			}
		}
		return []any{c}
	}

	s := startStream(w, r, ctl, sseLF)
	// Azure first sends the prompt's filter results, in a chunk with empty
	// choices and no usage key (not the usage chunk), and empty id and model.
	if azure && !s.event("", map[string]any{
		"choices": []any{}, "created": 0, "id": "", "model": "", "object": "",
		"prompt_filter_results": azurePromptFilterResults(),
	}) {
		return
	}
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
	// Azure's verdict on the whole output text comes after the finish
	// chunk: choices without a delta.
	if azure && !s.event("", map[string]any{
		"choices": []any{map[string]any{
			"content_filter_offsets": map[string]any{"check_offset": 0, "start_offset": 0, "end_offset": 4 * u.output},
			"content_filter_results": azureContentFilterResults(), "finish_reason": nil, "index": 0,
		}},
		"created": 0, "id": "", "model": "", "object": "",
	}) {
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
