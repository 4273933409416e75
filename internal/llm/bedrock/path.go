package bedrock

import (
	"strings"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// MatchPath reports whether a request path is a Converse or ConverseStream
// call: /model/{modelId}/converse or /model/{modelId}/converse-stream,
// possibly below a gateway prefix and with a query string.
func MatchPath(path string) bool {
	_, _, ok := ModelFromPath(path)
	return ok
}

// ModelFromPath returns the model id a raw request path names and
// whether the call streams. The path is read as [llm.CleanPath] decodes
// it, once, so an ARN sent as arn%3Aaws%3Abedrock…%2F… is the model id
// arn:aws:bedrock…/…: the id is everything between the first "/model/"
// and the method, slashes included (an inference profile's ARN has one).
// No ARN resource type is spelt "/model/", so the first one is the path's.
func ModelFromPath(path string) (model string, stream bool, ok bool) {
	path = llm.CleanPath(path)
	switch {
	case strings.HasSuffix(path, "/converse"):
		path = path[:len(path)-len("/converse")]
	case strings.HasSuffix(path, "/converse-stream"):
		path, stream = path[:len(path)-len("/converse-stream")], true
	default:
		return "", false, false
	}
	i := strings.Index(path, "/model/")
	if i < 0 {
		return "", false, false
	}
	model = path[i+len("/model/"):]
	if model == "" {
		return "", false, false
	}
	return model, stream, true
}
