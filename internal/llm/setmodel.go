package llm

import (
	"errors"
	"net/url"
	"strings"
)

// ModelSetter is an API that can send a request to another model than
// the one it names, for a limit's downgrade (on_exhausted.downgrade_to).
// An API that does not implement it is never downgraded.
type ModelSetter interface {
	// SetModel returns the request's raw :path and body with model named
	// in place of the model they name: path is "" when the path does not
	// change, body nil when the body does not. The body is one
	// ParseRequest accepted; an edit keeps the rest of it byte for byte,
	// as Inject does. An error means the request cannot be sent to model
	// (its path spells the model in a way no edit can replace safely).
	SetModel(rawPath string, body []byte, model string) (path string, edited []byte, err error)
}

// ErrModelNotSettable is SetModel's error for a request whose model
// cannot be replaced.
var ErrModelNotSettable = errors.New("the request's model cannot be replaced")

// ReplacePathModel returns rawPath with its model segment, which runs
// from just after prefixEnd (an index into the path part of rawPath) to
// the path's suffix, replaced by model, escaped as a path segment; the
// query string is kept. The suffix must end the path part as it is
// spelt, unescaped. modelOf reads the result back: unless it names
// model, the edit is refused, so that no spelling of a path sends the
// upstream a model other than the one reserved.
func ReplacePathModel(rawPath string, prefixEnd int, suffix, model string, modelOf func(string) (string, bool, bool)) (string, error) {
	p, query := rawPath, ""
	if i := strings.IndexAny(rawPath, "?#"); i >= 0 {
		p, query = rawPath[:i], rawPath[i:]
	}
	if prefixEnd < 0 || prefixEnd > len(p)-len(suffix) || !strings.HasSuffix(p, suffix) {
		return "", ErrModelNotSettable
	}
	out := p[:prefixEnd] + url.PathEscape(model) + suffix + query
	if got, _, ok := modelOf(out); !ok || got != model {
		return "", ErrModelNotSettable
	}
	return out, nil
}
