package llm

import (
	"fmt"

	"github.com/tidwall/gjson"
)

// NewPathRequest begins parsing a request to an API that names the model
// in its path and always reports usage, streamed or not (Gemini,
// Bedrock): it returns the Request with the model and streaming that
// modelFromPath reads from path and one choice, after checking body with
// [CheckTop] against fields, and the body's top-level fields named by
// names, as CheckTop returns them (in out when it is large enough). The
// wire format reads the rest from them.
func NewPathRequest(path string, body []byte, fields *Fields, modelFromPath func(path string) (model string, stream, ok bool),
	out []gjson.Result, names ...string) (Request, []gjson.Result, error) {
	var req Request
	model, stream, ok := modelFromPath(path)
	if !ok {
		return req, nil, fmt.Errorf("path does not name a model: %.64q", path)
	}
	req.Model, req.Stream, req.StreamUsage, req.Choices = model, stream, true, 1
	f, err := CheckTop(body, fields, out, names...)
	return req, f, err
}
