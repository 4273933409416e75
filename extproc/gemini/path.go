package gemini

import (
	"strings"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

const (
	generateSuffix = ":generateContent"
	streamSuffix   = ":streamGenerateContent"
)

// MatchPath reports whether a request path is a generateContent or
// streamGenerateContent call on a model (…/models/{model}:method, with or
// without a query string), as the Gemini API and Vertex AI spell it.
func MatchPath(path string) bool {
	_, _, ok := ModelFromPath(path)
	return ok
}

// ModelFromPath returns the model a raw request path names and whether
// the call streams. The path is read as [llm.CleanPath] decodes it, once:
// /v1beta/models/m%3AgenerateContent is the generateContent method, as
// Google's front end serves it.
func ModelFromPath(path string) (model string, stream bool, ok bool) {
	path = llm.CleanPath(path)
	switch {
	case strings.HasSuffix(path, generateSuffix):
		path = path[:len(path)-len(generateSuffix)]
	case strings.HasSuffix(path, streamSuffix):
		path, stream = path[:len(path)-len(streamSuffix)], true
	default:
		return "", false, false
	}
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", false, false
	}
	model, parent := path[i+1:], path[:i]
	if !strings.HasSuffix(parent, "/models") && !strings.HasSuffix(parent, "/tunedModels") {
		return "", false, false
	}
	if model == "" {
		return "", false, false
	}
	return model, stream, true
}
