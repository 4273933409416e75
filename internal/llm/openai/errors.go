package openai

import (
	"encoding/json"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// RenderError implements llm.API with OpenAI's error shape,
// {"error":{"message","type","param","code"}}. A rate limit's type is the
// tripped dimension, as OpenAI's own are ("tokens", "requests").
func (Chat) RenderError(e llm.Error) llm.Reply { return RenderError(e) }

// RenderError renders e in OpenAI's error shape. The SDKs pick the error
// class from the status alone (429 → RateLimitError, 503 → a retried
// InternalServerError), so the type and code are for humans and for
// clients that branch on OpenAI's codes.
func RenderError(e llm.Error) llm.Reply {
	typ := "invalid_request_error"
	switch e.Kind {
	case llm.RateLimited:
		typ = e.Dimension
		if typ == "" {
			typ = "requests"
		}
	case llm.Unavailable:
		typ = "server_error"
	}
	var code *string
	if e.Code != "" {
		code = &e.Code
	}
	body, _ := json.Marshal(struct {
		Error openaiError `json:"error"`
	}{openaiError{Message: e.Message, Type: typ, Code: code}})
	return llm.Reply{Body: body}
}

type openaiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}
