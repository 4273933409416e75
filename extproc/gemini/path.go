package gemini

import (
	"net/url"
	"strings"
)

const (
	generateSuffix = ":generateContent"
	streamSuffix   = ":streamGenerateContent"
)

// MatchPath reports whether a request path is a generateContent or
// streamGenerateContent call on a model (…/models/{model}:method, with or
// without a query string), as the Gemini API and Vertex AI spell it.
func MatchPath(path string) bool {
	_, _, ok := parsePath(path)
	return ok
}

// ModelFromPath returns the model a path names, unescaped, and whether the
// call streams.
func ModelFromPath(path string) (model string, stream bool, ok bool) {
	return parsePath(path)
}

func parsePath(path string) (model string, stream bool, ok bool) {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimRight(path, "/")
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
	if !strings.HasSuffix(parent, "/models") && !strings.HasSuffix(parent, "/tunedModels") &&
		parent != "models" && parent != "tunedModels" {
		return "", false, false
	}
	if m, err := url.PathUnescape(model); err == nil {
		model = m
	}
	if model == "" {
		return "", false, false
	}
	return model, stream, true
}
