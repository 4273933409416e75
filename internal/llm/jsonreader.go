package llm

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// JSONReader reads the usage of a non-streamed JSON reply, in bounded
// memory (see [Capture]): every API that answers one puts its usage in a
// top-level "usage" object, in its own shape, which parse maps.
type JSONReader struct {
	body    Capture
	parse   func(gjson.Result) (accounting.Usage, bool)
	text    ReplyText
	model   string
	counter Counter
}

// ReplyText calls emit with each piece of generated text of a whole JSON
// reply: its content, tool-call arguments and the reasoning it shows,
// never the envelope around them. Nil for an API that generates none
// (embeddings).
type ReplyText func(reply gjson.Result, emit func(text string))

// NewJSONReader returns a reader whose usage is parse applied to the
// body's top-level "usage", and whose observed output is the text that
// text finds in the body, counted for model.
func NewJSONReader(model string, opts ReaderOptions, parse func(gjson.Result) (accounting.Usage, bool), text ReplyText) *JSONReader {
	return &JSONReader{body: NewCapture(opts.BufferSize()), parse: parse, text: text, model: model, counter: opts.Counter}
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

// ObservedOutputTokens counts the generated text of the body seen so far
// (of a cut body, what its JSON holds up to the cut). A body larger than
// the reader keeps, of which only the tail is left, is counted by its
// size instead.
func (r *JSONReader) ObservedOutputTokens() int64 {
	if r.text == nil {
		return 0
	}
	reply, whole := r.body.Whole()
	if !whole {
		return ObservedTokens(r.body.Len())
	}
	var n int64
	texts := NewTextCounter(r.counter, r.model)
	r.text(reply, func(s string) {
		if s != "" {
			n += texts.Count(s)
		}
	})
	return n
}
