package anthropic

import (
	"encoding/json"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// RenderError implements llm.API with Anthropic's error shape,
// {"type":"error","error":{"type","message"}}. The SDKs retry 429 and 5xx
// (honouring retry-after-ms, retry-after and x-should-retry) and map the
// status to their error classes; the type names the kind for humans and
// for clients that branch on it.
func (Messages) RenderError(e llm.Error) llm.Reply { return RenderError(e) }

// RenderError renders e in Anthropic's error shape.
func RenderError(e llm.Error) llm.Reply {
	typ := "invalid_request_error"
	switch e.Kind {
	case llm.RateLimited:
		typ = "rate_limit_error"
	case llm.Unavailable:
		// overloaded_error goes with Anthropic's own 529; a 503 is an
		// api_error.
		typ = "api_error"
	case llm.Unauthenticated:
		typ = "authentication_error"
	case llm.Forbidden:
		typ = "permission_error"
	}
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	body, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{typ, e.Message}})
	return llm.Reply{Body: body}
}
