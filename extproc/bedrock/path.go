package bedrock

import (
	"net/url"
	"strings"
)

// MatchPath reports whether a request path is a Converse or ConverseStream
// call: /model/{modelId}/converse or /model/{modelId}/converse-stream,
// possibly below a gateway prefix and with a query string.
func MatchPath(path string) bool {
	_, _, ok := ModelFromPath(path)
	return ok
}

// ModelFromPath returns the model id a path names, URL-decoded (an ARN
// arrives as arn%3Aaws%3Abedrock…%2F…), and whether the call streams.
func ModelFromPath(path string) (model string, stream bool, ok bool) {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimRight(path, "/")
	switch {
	case strings.HasSuffix(path, "/converse"):
		path = path[:len(path)-len("/converse")]
	case strings.HasSuffix(path, "/converse-stream"):
		path, stream = path[:len(path)-len("/converse-stream")], true
	default:
		return "", false, false
	}
	var raw string
	switch i := strings.LastIndex(path, "/model/"); {
	case i >= 0:
		raw = path[i+len("/model/"):]
	case strings.HasPrefix(path, "model/"):
		raw = path[len("model/"):]
	default:
		return "", false, false
	}
	if raw == "" || strings.Contains(raw, "/") {
		return "", false, false
	}
	m, err := url.PathUnescape(raw)
	if err != nil || m == "" {
		return "", false, false
	}
	return m, stream, true
}
