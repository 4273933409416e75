package llm

import "fmt"

// NewPathRequest begins parsing a request to an API that names the model
// in its path and always reports usage, streamed or not (Gemini,
// Bedrock): it returns the Request with the model and streaming that
// modelFromPath reads from path and one choice, after checking body with
// [CheckBody] against fields. The wire format reads the rest from the
// body.
func NewPathRequest(path string, body []byte, fields *Fields, modelFromPath func(path string) (model string, stream, ok bool)) (Request, error) {
	var req Request
	model, stream, ok := modelFromPath(path)
	if !ok {
		return req, fmt.Errorf("path does not name a model: %.64q", path)
	}
	req.Model, req.Stream, req.StreamUsage, req.Choices = model, stream, true, 1
	return req, CheckBody(body, fields)
}
