package llm

import "mime"

// HasMediaType reports whether contentType (a Content-Type value, with or
// without parameters) is of mediaType. Media types are case-insensitive;
// a value that does not parse is of no type.
func HasMediaType(contentType, mediaType string) bool {
	if contentType == "" {
		// The common case of a body without a type, without the parse.
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == mediaType
}

// IsEventStream reports whether contentType is text/event-stream: a
// response that streams its output as server-sent events.
func IsEventStream(contentType string) bool {
	return HasMediaType(contentType, "text/event-stream")
}
