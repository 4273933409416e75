package gemini

import (
	"encoding/json"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// RenderError implements llm.API with Google's error shape,
// {"error":{"code","message","status"}}: the status names the gRPC code
// that Google's SDKs (and their retry policies) key on.
func (GenerateContent) RenderError(e llm.Error) llm.Reply { return RenderError(e) }

// RenderError renders e in Google's error shape.
func RenderError(e llm.Error) llm.Reply {
	status := "INVALID_ARGUMENT"
	switch e.Kind {
	case llm.RateLimited:
		status = "RESOURCE_EXHAUSTED"
	case llm.Unavailable:
		status = "UNAVAILABLE"
	case llm.Unauthenticated:
		status = "UNAUTHENTICATED"
	case llm.Forbidden:
		status = "PERMISSION_DENIED"
	}
	type detail struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	}
	body, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{detail{e.Kind.Status(), e.Message, status}})
	return llm.Reply{Body: body}
}
