package bedrock

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/eventstream"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// ContentType is the media type of converse-stream responses.
const ContentType = "application/vnd.amazon.eventstream"

// NewUsageReader implements llm.API.
func (Converse) NewUsageReader(req *llm.Request, contentType string, opts llm.ReaderOptions) llm.UsageReader {
	opts.MaxBuffer = opts.BufferSize()
	if llm.HasMediaType(contentType, ContentType) {
		return NewStreamReader(req.Model, opts)
	}
	return llm.NewJSONReader(req.Model, opts, ParseUsage, ReplyText)
}

// StreamReader follows a converse-stream event stream.
type StreamReader struct {
	model   string
	counter llm.Counter
	// texts counts model's text, decided on at the first text: once per
	// stream rather than once per delta.
	texts    llm.TextCounter
	hasTexts bool
	dec      *eventstream.Decoder
	usage    accounting.Usage
	has      bool
	// unreadable: a metadata event's usage could not be read
	// unambiguously (see readUsage): the stream reports none.
	unreadable bool
	stopped    bool // messageStop seen
	errored    bool // an exception message arrived
	observed   int64
	// buf holds the current delta's escaped text, decoded.
	buf []byte
}

// maxKeptBuf bounds the decoding buffer kept between messages.
const maxKeptBuf = 16 << 10

// NewStreamReader returns a reader for a converse-stream response.
func NewStreamReader(model string, opts llm.ReaderOptions) *StreamReader {
	r := &StreamReader{
		model:   model,
		counter: opts.TokenCounter(),
		dec:     eventstream.NewDecoder(eventstream.Options{MaxPayloadBytes: opts.MaxBuffer}),
	}
	return r
}

func (r *StreamReader) onMessage(m *eventstream.Message) {
	if !m.HeaderIs(":message-type", "event") {
		// exception (a modelled error such as throttlingException) or
		// error (an unmodelled one): the stream ends without usage.
		r.errored = true
		return
	}
	if m.Truncated {
		r.observed += llm.ObservedTokens(int64(m.PayloadLen))
		return
	}
	typ, _, _ := m.Header(":event-type")
	switch string(typ) {
	case "contentBlockDelta":
		r.readDelta(m.Payload, true)
	case "messageStop":
		r.stopped = true
	case "metadata":
		u, once := llm.UniqueMember(gjson.Parse(llm.View(m.Payload)), "usage")
		usage, present, readable := readUsage(u)
		switch {
		case !once || !readable:
			r.unreadable = true
		case present:
			r.usage, r.has = usage, true
		}
	}
}

// readDelta counts a contentBlockDelta's text. With scan, a well-formed
// delta is read with the scanner, which decodes escaped text without
// allocating; gjson reads any other, and every delta when scan is false
// (the reading the scanner's is tested against).
func (r *StreamReader) readDelta(payload []byte, scan bool) {
	d := gjson.Get(llm.View(payload), "delta")
	if scan && r.scanDelta(d) {
		return
	}
	d.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "text":
			r.count(v.Str)
		case "toolUse":
			r.count(v.Get("input").Str)
		case "reasoningContent":
			r.count(v.Get("text").Str)
		}
		return true
	})
}

// scanDelta counts a well-formed delta's text, and reports false, having
// counted nothing, for one it leaves to gjson.
func (r *StreamReader) scanDelta(d gjson.Result) bool {
	if !d.IsObject() || !llm.WellFormedObject(llm.BytesView(d.Raw)) {
		return false
	}
	r.buf = r.buf[:0]
	var scratch [32]byte
	fields := llm.ScanObject(llm.BytesView(d.Raw))
	for k, v, ok := fields.Next(); ok; k, v, ok = fields.Next() {
		var text []byte
		switch llm.DecodeJSONString(k, scratch[:]) {
		case "text":
			text = v
		case "toolUse":
			text, _ = llm.JSONMember(v, "input")
		case "reasoningContent":
			text, _ = llm.JSONMember(v, "text")
		default:
			continue
		}
		s, _ := llm.JSONText(text, &r.buf)
		r.count(s)
	}
	if cap(r.buf) > maxKeptBuf {
		r.buf = nil
	}
	return true
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

// Write implements llm.UsageReader. A corrupt or oversized frame stops
// the decoding (see eventstream); what was read until then stands. (The
// method value r.onMessage does not escape the decoder's Write, so it
// costs no allocation.)
func (r *StreamReader) Write(p []byte) { _ = r.dec.Write(p, r.onMessage) }

// Usage implements llm.UsageReader.
func (r *StreamReader) Usage() (accounting.Usage, bool) {
	if r.unreadable {
		return accounting.Usage{}, false
	}
	return r.usage, r.has
}

// ObservedOutputTokens implements llm.UsageReader.
func (r *StreamReader) ObservedOutputTokens() int64 { return r.observed }

// Final implements llm.UsageReader: the metadata event comes once, last.
func (r *StreamReader) Final() bool { return r.has && !r.unreadable }

// Errored reports whether the stream carried an exception message.
func (r *StreamReader) Errored() bool { return r.errored }

// Err returns the framing error that stopped decoding, if any.
func (r *StreamReader) Err() error { return r.dec.Err() }
