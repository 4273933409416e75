package anthropic

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/sse"
)

// NewUsageReader implements llm.API.
func (Messages) NewUsageReader(req *llm.Request, contentType string, opts llm.ReaderOptions) llm.UsageReader {
	opts.MaxBuffer = opts.BufferSize()
	if llm.IsEventStream(contentType) {
		return NewStreamReader(req.Model, opts)
	}
	return llm.NewJSONReader(opts, ParseUsage)
}

// ParseUsage maps an Anthropic usage object onto accounting.Usage.
func ParseUsage(u gjson.Result) (accounting.Usage, bool) {
	var f UsageFields
	if !f.Apply(u) {
		return accounting.Usage{}, false
	}
	return f.Usage(), true
}

// StreamReader follows a Messages SSE stream.
type StreamReader struct {
	model    string
	counter  llm.Counter
	dec      *sse.Decoder
	fields   UsageFields
	started  bool // message_start reported usage
	final    bool // message_delta reported usage
	errored  bool
	observed int64
	handler  func(sse.Event)
	// buf holds the current event's escaped text, decoded.
	buf []byte
}

// maxKeptBuf bounds the decoding buffer kept between events.
const maxKeptBuf = 16 << 10

// NewStreamReader returns a reader for a Messages stream.
func NewStreamReader(model string, opts llm.ReaderOptions) *StreamReader {
	r := &StreamReader{model: model, counter: opts.TokenCounter(), dec: sse.NewDecoder(sse.Options{MaxEventBytes: opts.MaxBuffer})}
	r.handler = r.onEvent
	return r
}

// onEvent dispatches on the payload's "type" rather than the event name:
// the two are equal by contract, and the payload is what gets parsed. A
// well-formed payload is read with the scanner, which allocates nothing;
// anything else with gjson, which reads malformed JSON its own way. Both
// read the same fields the same way.
func (r *StreamReader) onEvent(ev sse.Event) {
	if ev.Truncated {
		r.observed += llm.ObservedTokens(int64(ev.DataLen))
		return
	}
	r.buf = r.buf[:0]
	if llm.WellFormedObject(ev.Data) {
		r.scanEvent(ev.Data)
	} else {
		r.gjsonEvent(ev.Data)
	}
	if cap(r.buf) > maxKeptBuf {
		r.buf = nil
	}
}

// deltaText names the field of each content_block_delta type that
// carries generated text.
func deltaText(typ string) string {
	switch typ {
	case "text_delta":
		return "text"
	case "thinking_delta":
		return "thinking"
	case "input_json_delta":
		return "partial_json"
	}
	return ""
}

func (r *StreamReader) scanEvent(data []byte) {
	typ, _ := llm.JSONMember(data, "type")
	switch r.text(typ) {
	case "content_block_delta":
		d, _ := llm.JSONMember(data, "delta")
		dt, _ := llm.JSONMember(d, "type")
		if field := deltaText(r.text(dt)); field != "" {
			v, _ := llm.JSONMember(d, field)
			r.count(r.text(v))
		}
	case "message_start":
		u, _ := llm.JSONPath(data, "message", "usage")
		if r.fields.Apply(gjson.Parse(llm.View(u))) {
			r.started = true
		}
	case "message_delta":
		u, _ := llm.JSONMember(data, "usage")
		if r.fields.Apply(gjson.Parse(llm.View(u))) {
			r.final = true
		}
	case "error":
		r.errored = true
	}
	// ping, content_block_start/stop, message_stop and events not known
	// yet carry nothing to count.
}

// text returns the text of a raw string value, "" for anything else.
func (r *StreamReader) text(v []byte) string {
	s, _ := llm.JSONText(v, &r.buf)
	return s
}

func (r *StreamReader) gjsonEvent(data []byte) {
	doc := gjson.Parse(llm.View(data))
	switch doc.Get("type").Str {
	case "content_block_delta":
		d := doc.Get("delta")
		if field := deltaText(d.Get("type").Str); field != "" {
			r.count(d.Get(field).Str)
		}
	case "message_start":
		if r.fields.Apply(doc.Get("message.usage")) {
			r.started = true
		}
	case "message_delta":
		if r.fields.Apply(doc.Get("usage")) {
			r.final = true
		}
	case "error":
		r.errored = true
	}
}

func (r *StreamReader) count(s string) {
	if s != "" {
		r.observed += r.counter.CountTokens(r.model, s)
	}
}

// Write implements llm.UsageReader.
func (r *StreamReader) Write(p []byte) { r.dec.Write(p, r.handler) }

// Usage implements llm.UsageReader. Before message_delta the output is
// provisional: the larger of message_start's and the observed output.
func (r *StreamReader) Usage() (accounting.Usage, bool) {
	if !r.started && !r.final {
		return accounting.Usage{}, false
	}
	u := r.fields.Usage()
	if !r.final {
		u.OutputTokens = max(u.OutputTokens, r.observed)
	}
	return u, true
}

// ObservedOutputTokens implements llm.UsageReader.
func (r *StreamReader) ObservedOutputTokens() int64 { return r.observed }

// Errored reports whether the stream carried an error event (such as
// overloaded_error) after its 200 status.
func (r *StreamReader) Errored() bool { return r.errored }
