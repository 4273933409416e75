package main

import (
	"log/slog"
	"net/http"
	"strings"
)

// geminiRequest holds the fields of a Gemini generateContent request that change
// fakellm's answer.
//
// Google's proto JSON parser takes a field's lowerCamelCase name and its
// proto name alike; when a body has both, fakellm reads the camelCase one.
type geminiRequest struct {
	GenerationConfig *struct {
		MaxOutputTokens *int `json:"maxOutputTokens" alias:"max_output_tokens"`
	} `json:"generationConfig" alias:"generation_config"`
}

// geminiStatus is the google.rpc status name Gemini pairs with an HTTP status.
func geminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// geminiError answers with Gemini's error shape; a 429 carries RetryInfo as the
// real API's does.
func geminiError(w http.ResponseWriter, status int, msg string) {
	e := map[string]any{"code": status, "message": msg, "status": geminiStatus(status)}
	if status == http.StatusTooManyRequests {
		e["details"] = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}}
	}
	writeJSON(w, controls{cutAfter: -1}, status, map[string]any{"error": e})
}

// geminiUsage is a usageMetadata snapshot after output tokens were generated.
// Gemini leaves zero counts out.
func geminiUsage(u usage, output int) map[string]any {
	m := map[string]any{
		"promptTokenCount":    u.reportedInput(),
		"totalTokenCount":     u.reportedTotal(output),
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": u.reportedInput()}},
	}
	if out := u.reportedOutput(output); out != 0 {
		m["candidatesTokenCount"] = out
	}
	if u.cached > 0 {
		m["cachedContentTokenCount"] = u.cached
	}
	return m
}

// serveGemini answers POST /v1beta/models/{model}:generateContent and
// :streamGenerateContent (SSE with ?alt=sse, else a streamed JSON array),
// and the embedding methods (see serveGeminiEmbed).
func serveGemini(log *slog.Logger, w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	var stream bool
	switch method {
	case "generateContent":
	case "streamGenerateContent":
		stream = true
	case "embedContent", "batchEmbedContents":
		serveGeminiEmbed(log, w, r, model, method == "batchEmbedContents")
		return
	default:
		geminiError(w, http.StatusNotFound, "fakellm: unknown method "+method)
		return
	}
	ctl, body, ok := readRequest(w, r, geminiError)
	if !ok {
		return
	}
	var req geminiRequest
	if !decodeBody(w, body, &req, geminiError) {
		return
	}
	var outputCap *int
	if req.GenerationConfig != nil {
		outputCap = req.GenerationConfig.MaxOutputTokens
	}
	maxOut := 0
	if outputCap != nil {
		maxOut = *outputCap
	}
	setSeen(w.Header(), model, outputCap)
	u := ctl.plan(len(body), maxOut)
	if ctl.status != 0 {
		logRequest(log, r, "gemini", model, stream, ctl.status, u)
		geminiError(w, ctl.status, errorMessage(ctl.status))
		return
	}
	logRequest(log, r, "gemini", model, stream, http.StatusOK, u)

	finish := "STOP"
	if u.truncated {
		finish = "MAX_TOKENS"
	}
	id := newID("")
	response := func(text string, finish string, usage map[string]any) map[string]any {
		cand := map[string]any{"content": map[string]any{"parts": []any{map[string]any{"text": text}}, "role": "model"}, "index": 0}
		if finish != "" {
			cand["finishReason"] = finish
		}
		return map[string]any{"candidates": []any{cand}, "usageMetadata": usage, "modelVersion": model, "responseId": id}
	}
	if !stream {
		if !sleep(r.Context(), ctl.chunkDelay) {
			return
		}
		writeJSON(w, ctl, http.StatusOK, response(fullText(u.output), finish, geminiUsage(u, u.output)))
		return
	}

	format := jsonArray
	if r.URL.Query().Get("alt") == "sse" {
		format = sseCRLF
	}
	s := startStream(w, r, ctl, format)
	texts := chunkTexts(u.output, ctl.chunks)
	done := 0
	for i, t := range texts {
		s.cutHere(len(texts))
		// Every chunk carries a cumulative usage snapshot; the last one also the
		// finish reason.
		done += len(t) / 4
		f := ""
		if i == len(texts)-1 {
			f = finish
		}
		if !s.content("", response(t, f, geminiUsage(u, done))) {
			return
		}
	}
	s.cutHere(len(texts))
	s.end()
}
