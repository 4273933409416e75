package llm

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// JSONReader reads the usage of a non-streamed JSON reply, in bounded
// memory (see [Capture]): every API that answers one puts its usage in a
// top-level "usage" object, in its own shape, which parse maps.
type JSONReader struct {
	body  Capture
	parse func(gjson.Result) (accounting.Usage, bool)
}

// NewJSONReader returns a reader whose usage is parse applied to the
// body's top-level "usage".
func NewJSONReader(opts ReaderOptions, parse func(gjson.Result) (accounting.Usage, bool)) *JSONReader {
	return &JSONReader{body: NewCapture(opts.BufferSize()), parse: parse}
}

// Write implements UsageReader.
func (r *JSONReader) Write(p []byte) { r.body.Write(p) }

// Usage implements UsageReader. A body with two "usage" fields has none
// that settlement may trust: it falls back as for a body without.
func (r *JSONReader) Usage() (accounting.Usage, bool) {
	u, once := r.body.GetOnce("usage")
	if !once {
		return accounting.Usage{}, false
	}
	return r.parse(u)
}

// Final implements UsageReader: a reply's usage is whole once it is
// there.
func (r *JSONReader) Final() bool { return true }

// ObservedOutputTokens charges a cut body by its size: its text cannot be
// parsed until it is complete.
func (r *JSONReader) ObservedOutputTokens() int64 { return ObservedTokens(r.body.Len()) }
