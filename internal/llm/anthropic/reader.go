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
	return llm.NewJSONReader(req.Model, opts, ParseUsage, ReplyText)
}

// ParseUsage maps an Anthropic usage object onto accounting.Usage, and
// reports false for none, or for one that cannot be read unambiguously
// (see UsageFields.Apply): settlement then falls back as for a reply
// without usage.
func ParseUsage(u gjson.Result) (accounting.Usage, bool) {
	var f UsageFields
	if present, readable := f.Apply(u); !present || !readable {
		return accounting.Usage{}, false
	}
	return f.Usage(), true
}

// StreamReader follows a Messages SSE stream.
type StreamReader struct {
	model   string
	counter llm.Counter
	// texts counts model's text, decided on at the first text: once per
	// stream rather than once per delta.
	texts    llm.TextCounter
	hasTexts bool
	dec      sse.Decoder
	fields   UsageFields
	started  bool // message_start reported usage
	final    bool // message_delta reported usage
	// unreadable: an event's usage could not be read unambiguously (see
	// UsageFields.Apply): the stream reports none, for good.
	unreadable bool
	errored    bool
	observed   int64
	// buf holds the current event's escaped text, decoded.
	buf []byte
}

// maxKeptBuf bounds the decoding buffer kept between events.
const maxKeptBuf = 16 << 10

// NewStreamReader returns a reader for a Messages stream.
func NewStreamReader(model string, opts llm.ReaderOptions) *StreamReader {
	return &StreamReader{model: model, counter: opts.TokenCounter(), dec: *sse.NewDecoder(sse.Options{MaxEventBytes: opts.MaxBuffer})}
}

// onEvent dispatches on the payload's "type" rather than the event name:
// the two are equal by contract, and the payload is what gets parsed.
func (r *StreamReader) onEvent(ev sse.Event) {
	if ev.Truncated {
		r.observed += llm.ObservedTokens(int64(ev.DataLen))
		return
	}
	r.readEvent(ev.Data, true)
}

// readEvent reads one payload. With scan, a text delta in Anthropic's
// own shape is read by exactDelta, and any other well-formed delta with
// the scanner, which decodes escaped text without allocating; gjson
// reads everything else, and every delta when scan is false (the
// reading the others are tested against).
func (r *StreamReader) readEvent(data []byte, scan bool) {
	if scan && r.exactDelta(data) {
		return
	}
	doc := gjson.Parse(llm.View(data))
	switch doc.Get("type").Str {
	case "content_block_delta":
		d := doc.Get("delta")
		if scan && r.scanDelta(d) {
			return
		}
		if field := deltaText(d.Get("type").Str); field != "" {
			r.count(d.Get(field).Str)
		}
	case "message_start":
		msg, once := llm.UniqueMember(doc, "message")
		u, uonce := llm.UniqueMember(msg, "usage")
		if r.apply(u, once && uonce) {
			r.started = true
		}
	case "message_delta":
		if r.apply(llm.UniqueMember(doc, "usage")) {
			r.final = true
		}
	case "error":
		r.errored = true
	}
	// ping, content_block_start/stop, message_stop and events not known
	// yet carry nothing to count.
}

// apply applies an event's usage u, found once or not, and reports
// whether it set a count; usage found twice or unreadable makes the
// stream's unreadable.
func (r *StreamReader) apply(u gjson.Result, once bool) bool {
	present, readable := r.fields.Apply(u)
	if !once || !readable {
		r.unreadable = true
		return false
	}
	return present
}

// deltaNames are the members of a delta the scanner reads: its type and
// the fields deltaText names.
var deltaNames = []string{"type", "text", "thinking", "partial_json"}

// scanDelta counts a well-formed delta's text, and reports false, having
// counted nothing, for one it leaves to gjson.
func (r *StreamReader) scanDelta(d gjson.Result) bool {
	var v [4][]byte
	if !d.IsObject() || !llm.JSONMembers(llm.BytesView(d.Raw), deltaNames, v[:]) {
		return false
	}
	r.buf = r.buf[:0]
	typ, _ := llm.JSONText(v[0], &r.buf)
	for i, name := range deltaNames[1:] {
		if deltaText(typ) == name {
			text, _ := llm.JSONText(v[i+1], &r.buf)
			r.count(text)
		}
	}
	if cap(r.buf) > maxKeptBuf {
		r.buf = nil
	}
	return true
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

func (r *StreamReader) count(s string) {
	if s == "" {
		return
	}
	if !r.hasTexts {
		r.texts, r.hasTexts = llm.NewTextCounter(r.counter, r.model), true
	}
	r.observed += r.texts.Count(s)
}

// Event reads one event's payload, as a framing other than SSE carries
// it (Bedrock's event stream, whose chunks each hold one).
func (r *StreamReader) Event(data []byte) { r.readEvent(data, true) }

// Write implements llm.UsageReader. (The method value r.onEvent does
// not escape the decoder's Write, so it costs no allocation.)
func (r *StreamReader) Write(p []byte) { r.dec.Write(p, r.onEvent) }

// Usage implements llm.UsageReader. Before message_delta the output is
// provisional: the larger of message_start's and the observed output.
func (r *StreamReader) Usage() (accounting.Usage, bool) {
	if r.unreadable || !r.started && !r.final {
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

// Final implements llm.UsageReader: only message_delta's usage is final;
// message_start's counts one output token.
func (r *StreamReader) Final() bool { return r.final && !r.unreadable }

// Errored reports whether the stream carried an error event (such as
// overloaded_error) after its 200 status.
func (r *StreamReader) Errored() bool { return r.errored }
