package main

import (
	"log/slog"
	"net/http"
	"time"
)

// responsesRequest holds the fields of an OpenAI Responses API request that
// change fakellm's answer.
type responsesRequest struct {
	Model           string `json:"model"`
	Stream          bool   `json:"stream"`
	MaxOutputTokens *int   `json:"max_output_tokens"`
	Background      bool   `json:"background"`
}

// minResponsesOutputCap is the smallest max_output_tokens the Responses API takes.
const minResponsesOutputCap = 16

// responsesUsage is the usage object of the Responses API.
func responsesUsage(u usage) map[string]any {
	return map[string]any{
		"input_tokens":          u.reportedInput(),
		"input_tokens_details":  map[string]any{"cached_tokens": u.cached},
		"output_tokens":         u.reportedOutput(u.output),
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          u.reportedTotal(u.output),
	}
}

// serveResponses answers POST /v1/responses.
func serveResponses(log *slog.Logger, w http.ResponseWriter, r *http.Request) {
	ctl, body, ok := readRequest(w, r, openAIError)
	if !ok {
		return
	}
	var req responsesRequest
	if !decodeBody(w, body, &req, openAIError) {
		return
	}
	if req.Model == "" {
		openAIError(w, http.StatusBadRequest, "Missing required parameter: 'model'.")
		return
	}
	maxOut := 0
	if req.MaxOutputTokens != nil {
		if *req.MaxOutputTokens < minResponsesOutputCap {
			openAIError(w, http.StatusBadRequest, "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16.")
			return
		}
		maxOut = *req.MaxOutputTokens
	}
	setSeen(w.Header(), req.Model, req.MaxOutputTokens)
	u := ctl.plan(len(body), maxOut)
	w.Header().Set("x-request-id", newID("req_"))
	if ctl.rateLimitHeaders {
		setOpenAIRateLimitHeaders(w.Header(), ctl)
	}
	if ctl.status != 0 {
		logRequest(log, r, "openai.responses", req.Model, req.Stream, ctl.status, u)
		ctl.setRetryAfter(w)
		openAIError(w, ctl.status, errorMessage(ctl.status))
		return
	}
	logRequest(log, r, "openai.responses", req.Model, req.Stream, http.StatusOK, u)

	id, msgID, created := newID("resp_"), newID("msg_"), time.Now().Unix()
	status, itemStatus := "completed", "completed"
	var incomplete any
	if u.truncated {
		status, itemStatus = "incomplete", "incomplete"
		incomplete = map[string]any{"reason": "max_output_tokens"}
	}
	text := fullText(u.output)
	part := func(text string) map[string]any {
		return map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": text}
	}
	item := func(status string, content []any) map[string]any {
		return map[string]any{"id": msgID, "type": "message", "status": status, "content": content, "role": "assistant"}
	}
	// response builds the response object; usage stays null until the end.
	response := func(status string, output []any, usage any, incomplete any) map[string]any {
		return map[string]any{
			"id": id, "object": "response", "created_at": created, "status": status,
			"model": req.Model, "output": output, "usage": usage,
			"incomplete_details": incomplete, "error": nil,
			"max_output_tokens": req.MaxOutputTokens, "background": req.Background,
		}
	}
	final := response(status, []any{item(itemStatus, []any{part(text)})}, responsesUsage(u), incomplete)

	if req.Background && !req.Stream {
		// The reply only acknowledges the request: the generation runs on,
		// to be fetched later (GET /v1/responses/{id}, which fakellm does not
		// serve), and the usage it will bill is not known yet.
		writeJSON(w, ctl, http.StatusOK, response("queued", []any{}, nil, nil))
		return
	}
	if !req.Stream {
		if !sleep(r.Context(), ctl.chunkDelay) {
			return
		}
		writeJSON(w, ctl, http.StatusOK, final)
		return
	}

	s := startStream(w, r, ctl, sseLF)
	seq := 0
	// ev sends a named event whose data repeats the name in "type" and carries the
	// stream-wide sequence number, as the Responses API does.
	ev := func(send func(string, any) bool, typ string, fields map[string]any) bool {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		return send(typ, fields)
	}
	created0 := response("in_progress", []any{}, nil, nil)
	if req.Background {
		// A background stream starts queued.
		created0 = response("queued", []any{}, nil, nil)
	}
	inProgress := response("in_progress", []any{}, nil, nil)
	if !ev(s.event, "response.created", map[string]any{"response": created0}) ||
		!ev(s.event, "response.in_progress", map[string]any{"response": inProgress}) ||
		!ev(s.event, "response.output_item.added", map[string]any{"output_index": 0, "item": item("in_progress", []any{})}) ||
		!ev(s.event, "response.content_part.added", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "part": part("")}) {
		return
	}
	texts := chunkTexts(u.output, ctl.chunks)
	for _, t := range texts {
		s.cutHere(len(texts))
		if !ev(s.content, "response.output_text.delta", map[string]any{
			"item_id": msgID, "output_index": 0, "content_index": 0, "delta": t, "logprobs": []any{}, "obfuscation": obfuscation(),
		}) {
			return
		}
	}
	s.cutHere(len(texts))
	terminal := "response.completed"
	if u.truncated {
		terminal = "response.incomplete"
	}
	_ = ev(s.event, "response.output_text.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "text": text, "logprobs": []any{}}) &&
		ev(s.event, "response.content_part.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "part": part(text)}) &&
		ev(s.event, "response.output_item.done", map[string]any{"output_index": 0, "item": item(itemStatus, []any{part(text)})}) &&
		ev(s.event, terminal, map[string]any{"response": final})
}
