package llm

import (
	"mime"
	"strings"
)

// HasMediaType reports whether contentType (a Content-Type value, with or
// without parameters) is of mediaType. Media types are case-insensitive;
// a value that does not parse is of no type.
func HasMediaType(contentType, mediaType string) bool {
	if contentType == "" {
		// The common case of a body without a type, without the parse.
		return false
	}
	if mt, ok := plainMediaType(contentType); ok {
		return mt == mediaType
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == mediaType
}

// IsEventStream reports whether contentType is text/event-stream: a
// response that streams its output as server-sent events.
func IsEventStream(contentType string) bool {
	return HasMediaType(contentType, "text/event-stream")
}

// utf8Param is the one parameter plainMediaType reads.
const utf8Param = "; charset=utf-8"

// plainMediaType reads the Content-Type values every provider sends — a
// lower-case type/subtype, alone or with "; charset=utf-8" — without
// mime.ParseMediaType's allocations, as it would read them. It reports
// false for any other value, which ParseMediaType then reads.
func plainMediaType(contentType string) (string, bool) {
	mt := strings.TrimSuffix(contentType, utf8Param)
	slash := strings.IndexByte(mt, '/')
	if slash <= 0 || slash == len(mt)-1 {
		return "", false
	}
	for i := 0; i < len(mt); i++ {
		switch c := mt[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '+':
		case c == '/' && i == slash:
		default:
			return "", false
		}
	}
	return mt, true
}
