package gemini

import (
	"strings"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

const (
	generateSuffix = ":generateContent"
	streamSuffix   = ":streamGenerateContent"
)

// MatchPath reports whether a request path is a generateContent or
// streamGenerateContent call (…/{model}:method, with or without a query
// string), as the Gemini API and Vertex AI spell it. A path that ends in
// the method but names no model matches too: it is metered, and its
// parse refuses it, rather than pass unmetered.
func MatchPath(path string) bool {
	p := llm.CleanPath(path)
	return strings.HasSuffix(p, generateSuffix) || strings.HasSuffix(p, streamSuffix)
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
	// Whatever precedes the model — models/, tunedModels/, a Vertex AI
	// publisher's models/ or a tuned model's endpoints/ — the custom
	// method is the call: Google routes …/endpoints/{id}:generateContent
	// as a generation too.
	model = path[strings.LastIndexByte(path, '/')+1:]
	if model == "" {
		return "", false, false
	}
	return model, stream, true
}
