package openai

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/sse"
)

// EventFields are the top-level fields of one stream event that carry
// generated text, picked out in the single pass that also looks for
// usage: rescanning each event per field would double the per-chunk cost.
type EventFields struct {
	Choices gjson.Result // chat and completions
	Type    gjson.Result // Responses API
	Delta   gjson.Result // Responses API
}

// DeltaText extracts the generated text of one event, for counting the
// output of a stream cut short.
type DeltaText func(f *EventFields, emit func(text string))

// ChatDeltaText reads choices[].delta: content, reasoning, refusal and
// tool-call arguments.
func ChatDeltaText(f *EventFields, emit func(string)) {
	f.Choices.ForEach(func(_, c gjson.Result) bool {
		c.ForEach(func(k, d gjson.Result) bool {
			if k.Str != "delta" {
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

// CompletionsDeltaText reads choices[].text of a legacy completions stream.
func CompletionsDeltaText(f *EventFields, emit func(string)) {
	f.Choices.ForEach(func(_, c gjson.Result) bool {
		emit(c.Get("text").Str)
		return true
	})
}

// ResponsesDeltaText reads the "delta" of the Responses API's *.delta
// events: output text, reasoning text and summaries, refusals, tool-call
// arguments. The *.done and response.completed events repeat text already
// seen as deltas and are skipped; audio deltas are base64 and would count
// as far more tokens than they are.
func ResponsesDeltaText(f *EventFields, emit func(string)) {
	typ := f.Type.Str
	if len(typ) < len(".delta") || typ[len(typ)-len(".delta"):] != ".delta" || typ == "response.audio.delta" {
		return
	}
	emit(f.Delta.Str)
}

// StreamReader follows an OpenAI-style SSE stream: chat completions,
// completions and the Responses API, and the servers that copy them.
type StreamReader struct {
	model    string
	counter  llm.Counter
	dec      *sse.Decoder
	text     DeltaText
	usage    accounting.Usage
	hasUsage bool
	errored  bool
	observed int64
	handler  func(sse.Event)
	emit     func(string)
	scan     func(k, v gjson.Result) bool
	fields   EventFields // the current event's, reset per event
}

// NewStreamReader returns a reader that takes usage from any event with a
// non-null usage object (the last one wins, which is right both for
// OpenAI's single usage chunk and for vLLM's cumulative usage on every
// chunk), and counts the text that text extracts as observed output.
func NewStreamReader(model string, opts llm.ReaderOptions, text DeltaText) *StreamReader {
	r := &StreamReader{
		model:   model,
		counter: opts.TokenCounter(),
		dec:     sse.NewDecoder(sse.Options{MaxEventBytes: opts.BufferSize()}),
		text:    text,
	}
	// Bound once here: method values and closures made per event would
	// allocate on the hot path.
	r.handler = r.onEvent
	r.emit = r.count
	r.scan = r.topLevel
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
	r.fields = EventFields{}
	gjson.Parse(llm.View(ev.Data)).ForEach(r.scan)
	r.text(&r.fields, r.emit)
}

// topLevel looks at one top-level field of an event for usage: "usage"
// (chat, completions, vLLM, Mistral, xAI), "response.usage" (the Responses
// API's terminal events) or "x_groq.usage" (older Groq builds). Azure's
// content-filter chunks and chunks with "usage": null have none.
func (r *StreamReader) topLevel(k, v gjson.Result) bool {
	var u gjson.Result
	switch k.Str {
	case "usage":
		u = v
	case "response", "x_groq":
		u = v.Get("usage")
	case "error":
		// OpenAI's mid-stream error payload (the Responses API's error
		// event has "type":"error" and is caught the same way below).
		r.errored = true
		return true
	case "type", "object":
		// vLLM's {"object":"error"}, the Responses API's {"type":"error"}.
		if v.Str == "error" {
			r.errored = true
		}
		if k.Str == "type" {
			r.fields.Type = v
		}
		return true
	case "choices":
		r.fields.Choices = v
		return true
	case "delta":
		r.fields.Delta = v
		return true
	default:
		return true
	}
	if usage, ok := ParseUsage(u); ok {
		r.usage, r.hasUsage = usage, true
	}
	return true
}

func (r *StreamReader) count(s string) {
	if s != "" {
		r.observed += r.counter.CountTokens(r.model, s)
	}
}

// Write implements llm.UsageReader.
func (r *StreamReader) Write(p []byte) { r.dec.Write(p, r.handler) }

// Usage implements llm.UsageReader.
func (r *StreamReader) Usage() (accounting.Usage, bool) { return r.usage, r.hasUsage }

// ObservedOutputTokens implements llm.UsageReader.
func (r *StreamReader) ObservedOutputTokens() int64 { return r.observed }

// Errored reports whether the stream carried an error payload after its
// 200 status.
func (r *StreamReader) Errored() bool { return r.errored }
