package openai

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/sse"
)

// EventFields are the top-level fields of one stream event that carry
// generated text, as gjson parsed them, picked out in the single pass
// that also looks for usage: rescanning each event per field would
// double the per-chunk cost.
type EventFields struct {
	Choices gjson.Result // chat and completions
	Type    gjson.Result // Responses API
	Delta   gjson.Result // Responses API
}

// RawFields are the same fields of a well-formed event, raw (nil when
// absent), as the scanner of the reader's fast path found them.
type RawFields struct {
	Choices []byte
	Type    []byte
	Delta   []byte
}

// DeltaText extracts the generated text of one event, for counting the
// output of a stream cut short. It reads an event two ways, which must
// agree: from the raw values of a well-formed event, the fast path that
// decodes no more than the text, and from gjson's reading of any other
// event. text takes a raw JSON value and counts it if it is a string;
// emit counts a string.
type DeltaText struct {
	raw    func(f RawFields, text func(value []byte))
	fields func(f *EventFields, emit func(text string))
	// chunks: the text is chat's, and a chat chunk in OpenAI's shape can
	// be read by scanChunk.
	chunks bool
	// textDeltas: the text is the Responses API's, and an output text
	// delta in OpenAI's shape can be read by scanTextDelta.
	textDeltas bool
}

// ChatDeltaText reads choices[].delta: content, reasoning, refusal and
// tool-call arguments.
var ChatDeltaText = DeltaText{raw: chatDeltaRaw, fields: chatDeltaFields, chunks: true}

// CompletionsDeltaText reads choices[].text of a legacy completions stream.
var CompletionsDeltaText = DeltaText{raw: completionsDeltaRaw, fields: completionsDeltaFields}

// ResponsesDeltaText reads the "delta" of the Responses API's *.delta
// events: output text, reasoning text and summaries, refusals, tool-call
// arguments. The *.done and response.completed events repeat text already
// seen as deltas and are skipped; audio deltas are base64 and would count
// as far more tokens than they are.
var ResponsesDeltaText = DeltaText{raw: responsesDeltaRaw, fields: responsesDeltaFields, textDeltas: true}

func chatDeltaFields(f *EventFields, emit func(string)) { choicesText(f.Choices, "delta", emit) }

// choicesText emits the generated text of each choice's first member
// named part: a chunk's "delta", a reply's "message".
func choicesText(choices gjson.Result, part string, emit func(string)) {
	choices.ForEach(func(_, c gjson.Result) bool {
		c.ForEach(func(k, d gjson.Result) bool {
			if k.Str != part {
				return true
			}
			d.ForEach(func(k, v gjson.Result) bool {
				switch k.Str {
				case "content", "reasoning_content", "reasoning", "refusal":
					emit(v.Str)
				case "tool_calls":
					v.ForEach(func(_, tc gjson.Result) bool {
						emit(tc.Get("function.arguments").Str)
						return true
					})
				case "function_call":
					emit(v.Get("arguments").Str)
				}
				return true
			})
			return false
		})
		return true
	})
}

// chatDeltaRaw is chatDeltaFields on raw values: each choice's first
// "delta", and a tool call's function.arguments, as gjson's Get finds
// them.
func chatDeltaRaw(f RawFields, text func([]byte)) {
	choices := llm.ScanValues(f.Choices)
	for _, c, ok := choices.Next(); ok; _, c, ok = choices.Next() {
		d, ok := llm.JSONMember(c, "delta")
		if !ok || d[0] != '{' {
			continue
		}
		var scratch [32]byte
		fields := llm.ScanObject(d)
		for k, v, ok := fields.Next(); ok; k, v, ok = fields.Next() {
			switch llm.DecodeJSONString(k, scratch[:]) {
			case "content", "reasoning_content", "reasoning", "refusal":
				text(v)
			case "tool_calls":
				calls := llm.ScanValues(v)
				for _, tc, ok := calls.Next(); ok; _, tc, ok = calls.Next() {
					args, _ := llm.JSONPath(tc, "function", "arguments")
					text(args)
				}
			case "function_call":
				args, _ := llm.JSONMember(v, "arguments")
				text(args)
			}
		}
	}
}

func completionsDeltaFields(f *EventFields, emit func(string)) {
	f.Choices.ForEach(func(_, c gjson.Result) bool {
		emit(c.Get("text").Str)
		return true
	})
}

func completionsDeltaRaw(f RawFields, text func([]byte)) {
	choices := llm.ScanValues(f.Choices)
	for _, c, ok := choices.Next(); ok; _, c, ok = choices.Next() {
		t, _ := llm.JSONMember(c, "text")
		text(t)
	}
}

func responsesDeltaFields(f *EventFields, emit func(string)) {
	if isTextDelta(f.Type.Str) {
		emit(f.Delta.Str)
	}
}

func responsesDeltaRaw(f RawFields, text func([]byte)) {
	var typ string
	if len(f.Type) >= 2 && f.Type[0] == '"' {
		var scratch [64]byte
		typ = llm.DecodeJSONString(f.Type[1:len(f.Type)-1], scratch[:])
	}
	if isTextDelta(typ) {
		text(f.Delta)
	}
}

// isTextDelta reports a Responses API event type whose delta is text.
func isTextDelta(typ string) bool {
	return len(typ) >= len(".delta") && typ[len(typ)-len(".delta"):] == ".delta" && typ != "response.audio.delta"
}

// StreamReader follows an OpenAI-style SSE stream: chat completions,
// completions and the Responses API, and the servers that copy them.
type StreamReader struct {
	model   string
	counter llm.Counter
	// texts counts model's text, decided on at the first text: once per
	// stream rather than once per delta.
	texts    llm.TextCounter
	hasTexts bool
	dec      sse.Decoder
	text     DeltaText
	usage    accounting.Usage
	hasUsage bool
	// unreadable: an event's usage could not be read unambiguously (see
	// readUsage). The stream's usage is then unknown for good: a later
	// report could as well be lower than what a client read.
	unreadable bool
	// usageKeys counts the current event's usage members, each of which
	// may appear once (reset per event).
	usageKeys eventUsageKeys
	errored   bool
	observed  int64
	// The paths other than the chunk fast path call these, bound at
	// their first event: a method value made per event would allocate.
	emit    func(string)
	rawText func([]byte)
	scan    func(k, v gjson.Result) bool
	fields  EventFields // the current event's, reset per event
	// buf holds the current event's escaped text, decoded.
	buf []byte
}

// maxKeptBuf bounds the decoding buffer kept between events: a huge
// event's text is decoded, but its buffer is not kept for the rest of
// the stream.
const maxKeptBuf = 16 << 10

// NewStreamReader returns a reader that takes usage from any event with a
// non-null usage object (the last one wins, which is right both for
// OpenAI's single usage chunk and for vLLM's cumulative usage on every
// chunk), unless one is unreadable (see readUsage), and counts the text
// that text extracts as observed output.
func NewStreamReader(model string, opts llm.ReaderOptions, text DeltaText) *StreamReader {
	r := &StreamReader{
		model:   model,
		counter: opts.TokenCounter(),
		dec:     *sse.NewDecoder(sse.Options{MaxEventBytes: opts.BufferSize()}),
		text:    text,
	}
	return r
}

var done = []byte("[DONE]")

func (r *StreamReader) onEvent(ev sse.Event) {
	if ev.Truncated {
		// Its JSON will not parse; its size still says how much was
		// streamed.
		r.observed += llm.ObservedTokens(int64(ev.DataLen))
		return
	}
	if bytes.Equal(ev.Data, done) {
		return
	}
	r.buf = r.buf[:0]
	if !(r.text.chunks && r.scanChunk(ev.Data)) && !(r.text.textDeltas && r.scanTextDelta(ev.Data)) && !r.scanEvent(ev.Data) {
		r.gjsonEvent(ev.Data)
	}
	if cap(r.buf) > maxKeptBuf {
		r.buf = nil
	}
}

// gjsonEvent reads an event the scanner leaves to gjson: malformed
// JSON, or more members than it keeps track of.
func (r *StreamReader) gjsonEvent(data []byte) {
	if r.scan == nil {
		r.scan, r.emit = r.topLevel, r.count
	}
	r.fields = EventFields{}
	r.usageKeys = eventUsageKeys{}
	gjson.Parse(llm.View(data)).ForEach(r.scan)
	r.text.fields(&r.fields, r.emit)
}

// eventKey is a top-level key the reader acts on.
type eventKey uint8

const (
	keyOther eventKey = iota
	keyUsage
	keyNestedUsage // response, x_groq: a usage object inside
	keyError
	keyType
	keyObject
	keyChoices
	keyDelta
)

func eventKeyOf(name string) eventKey {
	switch name {
	case "usage":
		return keyUsage
	case "response", "x_groq":
		return keyNestedUsage
	case "error":
		return keyError
	case "type":
		return keyType
	case "object":
		return keyObject
	case "choices":
		return keyChoices
	case "delta":
		return keyDelta
	}
	return keyOther
}

// maxEventMembers bounds the members the fast path acts on in one event;
// an event with more of them is left to gjson.
const maxEventMembers = 16

// scanEvent is the fast path of onEvent, for a well-formed event: it
// acts on the same members, in the same order, as topLevel does on
// gjson's reading, and reports false, having changed nothing, for an
// event it leaves to gjson. The members are found first and acted on
// once the whole event is known to be well-formed, so that nothing is
// counted twice.
func (r *StreamReader) scanEvent(data []byte) bool {
	var members [maxEventMembers]struct {
		key   eventKey
		value []byte
	}
	n := 0
	var scratch [32]byte
	it := llm.ScanObject(data)
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		key := eventKeyOf(llm.DecodeJSONString(k, scratch[:]))
		if key == keyOther {
			continue
		}
		if n == len(members) {
			return false
		}
		members[n].key, members[n].value = key, v
		n++
	}
	if !it.WellFormed() {
		return false
	}
	// Usage is read before anything is acted on: an event whose usage is
	// not read unambiguously is left to gjson, which marks the stream's
	// usage unreadable. An event may carry usage under two members, which
	// must agree (see eventUsageKeys).
	var keys eventUsageKeys
	var usage accounting.Usage
	hasUsage := false
	for _, m := range members[:n] {
		u := m.value
		switch m.key {
		case keyUsage:
		case keyNestedUsage:
			var ok bool
			if u, ok = uniqueMemberRaw(u, "usage"); !ok {
				return false
			}
		default:
			continue
		}
		if !keys.add(m.key) {
			return false
		}
		got, present, readable := readUsageRaw(u)
		if !readable {
			return false
		}
		if present {
			if !keys.agree(got) {
				return false
			}
			usage, hasUsage = got, true
		}
	}
	if hasUsage {
		r.usage, r.hasUsage = usage, true
	}
	var f RawFields
	for _, m := range members[:n] {
		switch m.key {
		case keyUsage, keyNestedUsage:
		case keyError:
			r.errored = true
		case keyType, keyObject:
			if s, _ := llm.JSONText(m.value, &r.buf); s == "error" {
				r.errored = true
			}
			if m.key == keyType {
				f.Type = m.value
			}
		case keyChoices:
			f.Choices = m.value
		case keyDelta:
			f.Delta = m.value
		}
	}
	if r.rawText == nil {
		r.rawText = r.countValue
	}
	r.text.raw(f, r.rawText)
	return true
}

// topLevel looks at one top-level field of an event for usage: "usage"
// (chat, completions, vLLM, Mistral, xAI), "response.usage" (the Responses
// API's terminal events) or "x_groq.usage" (older Groq builds). Azure's
// content-filter chunks and chunks with "usage": null have none.
func (r *StreamReader) topLevel(k, v gjson.Result) bool {
	switch k.Str {
	case "usage":
		if !r.usageKeys.add(keyUsage) {
			r.unreadable = true
		}
		r.applyUsage(v)
	case "response", "x_groq":
		u, ok := llm.UniqueMember(v, "usage")
		if !ok || !r.usageKeys.add(keyNestedUsage) {
			r.unreadable = true
		}
		r.applyUsage(u)
	case "error":
		// OpenAI's mid-stream error payload (the Responses API's error
		// event has "type":"error" and is caught the same way below).
		r.errored = true
	case "type", "object":
		// vLLM's {"object":"error"}, the Responses API's {"type":"error"}.
		if v.Str == "error" {
			r.errored = true
		}
		if k.Str == "type" {
			r.fields.Type = v
		}
	case "choices":
		r.fields.Choices = v
	case "delta":
		r.fields.Delta = v
	}
	return true
}

func (r *StreamReader) applyUsage(u gjson.Result) {
	usage, present, readable := readUsage(u)
	switch {
	case !readable:
		r.unreadable = true
	case present:
		if !r.usageKeys.agree(usage) {
			r.unreadable = true
		}
		r.usage, r.hasUsage = usage, true
	}
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

// countValue counts a raw JSON value's text, if it is a string.
func (r *StreamReader) countValue(v []byte) {
	if s, ok := llm.JSONText(v, &r.buf); ok {
		r.count(s)
	}
}

// Write implements llm.UsageReader. (The method value r.onEvent does
// not escape the decoder's Write, so it costs no allocation.)
func (r *StreamReader) Write(p []byte) { r.dec.Write(p, r.onEvent) }

// Usage implements llm.UsageReader.
// A stream whose usage was unreadable reports none, so settlement falls
// back as for a stream without usage.
func (r *StreamReader) Usage() (accounting.Usage, bool) {
	if r.unreadable {
		return accounting.Usage{}, false
	}
	return r.usage, r.hasUsage
}

// ObservedOutputTokens implements llm.UsageReader.
func (r *StreamReader) ObservedOutputTokens() int64 { return r.observed }

// Final implements llm.UsageReader: OpenAI reports usage once, in the
// stream's last chunk; servers that report a running total on every
// chunk (vLLM) stream their reasoning as text, which is counted.
func (r *StreamReader) Final() bool { return r.hasUsage && !r.unreadable }

// Errored reports whether the stream carried an error payload after its
// 200 status.
func (r *StreamReader) Errored() bool { return r.errored }
