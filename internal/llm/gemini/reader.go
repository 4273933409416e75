package gemini

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/sse"
)

// NewUsageReader implements llm.API: SSE for alt=sse streams, the JSON
// scanner for everything else (a single response or the streamed array).
func (GenerateContent) NewUsageReader(req *llm.Request, contentType string, opts llm.ReaderOptions) llm.UsageReader {
	opts.MaxBuffer = opts.BufferSize()
	if llm.IsEventStream(contentType) {
		return NewSSEReader(req.Model, opts)
	}
	return NewJSONReader(req.Model, opts)
}

// snapshot is the reader state both framings share.
type snapshot struct {
	model    string
	counter  llm.Counter
	meta     Metadata
	has      bool
	final    bool // a finishReason was seen: the snapshot is the last
	errored  bool
	observed int64
}

func (s *snapshot) usage() (accounting.Usage, bool) {
	if !s.has {
		return accounting.Usage{}, false
	}
	u := s.meta.Usage()
	if !s.final {
		// A stream cut before its last chunk: its last snapshot may lag
		// the output that reached the client.
		u.OutputTokens = max(u.OutputTokens, s.observed)
	}
	return u, true
}

func (s *snapshot) count(text string) {
	if text != "" {
		s.observed += s.counter.CountTokens(s.model, text)
	}
}

// SSEReader follows a streamGenerateContent?alt=sse stream.
type SSEReader struct {
	snapshot
	dec     *sse.Decoder
	handler func(sse.Event)
	// buf holds the current event's escaped text, decoded.
	buf []byte
}

// maxKeptBuf bounds the decoding buffer kept between events.
const maxKeptBuf = 16 << 10

// NewSSEReader returns a reader for an alt=sse stream.
func NewSSEReader(model string, opts llm.ReaderOptions) *SSEReader {
	r := &SSEReader{snapshot: snapshot{model: model, counter: opts.TokenCounter()},
		dec: sse.NewDecoder(sse.Options{MaxEventBytes: opts.MaxBuffer})}
	r.handler = r.onEvent
	return r
}

// onEvent reads a well-formed event with the scanner, which allocates
// nothing, and anything else with gjson, which reads malformed JSON its
// own way. Both read the same fields the same way.
func (r *SSEReader) onEvent(ev sse.Event) {
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

func (r *SSEReader) scanEvent(data []byte) {
	var scratch [32]byte
	members := llm.ScanObject(data)
	for k, v, ok := members.Next(); ok; k, v, ok = members.Next() {
		switch llm.DecodeJSONString(k, scratch[:]) {
		case "usageMetadata", "usage_metadata":
			if m, ok := ParseMetadata(gjson.Parse(llm.View(v))); ok {
				r.meta, r.has = m, true
			}
		case "candidates":
			candidates := llm.ScanValues(v)
			for _, c, ok := candidates.Next(); ok; _, c, ok = candidates.Next() {
				if c[0] == '{' {
					r.scanCandidate(c)
				}
			}
		case "error":
			r.errored = true
		}
	}
}

// scanCandidate reads a candidate's parts and finish reason.
func (r *SSEReader) scanCandidate(c []byte) {
	var scratch [32]byte
	fields := llm.ScanObject(c)
	for k, v, ok := fields.Next(); ok; k, v, ok = fields.Next() {
		switch llm.DecodeJSONString(k, scratch[:]) {
		case "content":
			parts, _ := llm.JSONMember(v, "parts")
			it := llm.ScanValues(parts)
			for _, p, ok := it.Next(); ok; _, p, ok = it.Next() {
				t, _ := llm.JSONMember(p, "text")
				s, _ := llm.JSONText(t, &r.buf)
				r.count(s)
				if fc, ok := llm.JSONMember(p, "functionCall"); ok {
					r.count(llm.View(fc))
				}
			}
		case "finishReason", "finish_reason":
			r.final = true
		}
	}
}

func (r *SSEReader) gjsonEvent(data []byte) {
	doc := gjson.Parse(llm.View(data))
	doc.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "usageMetadata", "usage_metadata":
			if m, ok := ParseMetadata(v); ok {
				r.meta, r.has = m, true
			}
		case "candidates":
			v.ForEach(func(_, c gjson.Result) bool {
				c.ForEach(func(k, v gjson.Result) bool {
					switch k.Str {
					case "content":
						v.Get("parts").ForEach(func(_, p gjson.Result) bool {
							r.count(p.Get("text").Str)
							if fc := p.Get("functionCall"); fc.Exists() {
								r.count(fc.Raw)
							}
							return true
						})
					case "finishReason", "finish_reason":
						r.final = true
					}
					return true
				})
				return true
			})
		case "error":
			r.errored = true
		}
		return true
	})
}

// Write implements llm.UsageReader.
func (r *SSEReader) Write(p []byte) { r.dec.Write(p, r.handler) }

// Usage implements llm.UsageReader: the last snapshot.
func (r *SSEReader) Usage() (accounting.Usage, bool) { return r.usage() }

// ObservedOutputTokens implements llm.UsageReader.
func (r *SSEReader) ObservedOutputTokens() int64 { return r.observed }

// Errored reports whether the stream carried an error payload.
func (r *SSEReader) Errored() bool { return r.errored }

// JSONReader reads a generateContent JSON body or a streamGenerateContent
// JSON array, incrementally, with a Scanner.
type JSONReader struct {
	snapshot
	scan Scanner
	// text collects a "text" string so that it is counted whole (up to
	// textChunk bytes at a time): counting the pieces a Write boundary or
	// an escape makes would round up once per piece, and the count would
	// depend on how the body was split.
	text []byte
}

// textChunk bounds the text kept for counting.
const textChunk = 4 << 10

// NewJSONReader returns a reader for a JSON body or array stream.
func NewJSONReader(model string, opts llm.ReaderOptions) *JSONReader {
	r := &JSONReader{snapshot: snapshot{model: model, counter: opts.TokenCounter()}}
	r.scan.OnUsage = r.onUsage
	r.scan.OnText = r.onText
	r.scan.OnTextEnd = r.onTextEnd
	r.scan.OnFinish = r.onFinish
	return r
}

func (r *JSONReader) onUsage(obj []byte) {
	if m, ok := ParseMetadata(gjson.Parse(llm.View(obj))); ok {
		r.meta, r.has = m, true
	}
}

func (r *JSONReader) onText(piece []byte) {
	for len(piece) > 0 {
		k := min(len(piece), textChunk-len(r.text))
		r.text = append(r.text, piece[:k]...)
		piece = piece[k:]
		if len(r.text) == textChunk {
			r.onTextEnd()
		}
	}
}

func (r *JSONReader) onTextEnd() {
	r.count(llm.View(r.text))
	r.text = r.text[:0]
}

func (r *JSONReader) onFinish() { r.final = true }

// Write implements llm.UsageReader.
func (r *JSONReader) Write(p []byte) { r.scan.Write(p) }

// Usage implements llm.UsageReader: the last snapshot.
func (r *JSONReader) Usage() (accounting.Usage, bool) { return r.usage() }

// ObservedOutputTokens implements llm.UsageReader.
func (r *JSONReader) ObservedOutputTokens() int64 { return r.observed }
