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
	model   string
	counter llm.Counter
	// texts counts model's text, decided on at the first text: once per
	// stream rather than once per snapshot.
	texts    llm.TextCounter
	hasTexts bool
	meta     Metadata
	has      bool
	final    bool // a finishReason was seen: the snapshot is the last
	// unreadable: a snapshot could not be read unambiguously (see
	// ReadMetadata): the stream reports no usage, for good.
	unreadable bool
	errored    bool
	observed   int64
}

func (s *snapshot) usage() (accounting.Usage, bool) {
	if !s.has || s.unreadable {
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

// apply takes a usageMetadata object as the snapshot, or marks the
// usage unreadable.
func (s *snapshot) apply(u gjson.Result) {
	m, present, readable := ReadMetadata(u)
	switch {
	case !readable:
		s.unreadable = true
	case present:
		s.meta, s.has = m, true
	}
}

func (s *snapshot) count(text string) {
	if text == "" {
		return
	}
	if !s.hasTexts {
		s.texts, s.hasTexts = llm.NewTextCounter(s.counter, s.model), true
	}
	s.observed += s.texts.Count(text)
}

// SSEReader follows a streamGenerateContent?alt=sse stream.
type SSEReader struct {
	snapshot
	dec sse.Decoder
	// buf holds the current event's escaped text, decoded.
	buf []byte
}

// maxKeptBuf bounds the decoding buffer kept between events.
const maxKeptBuf = 16 << 10

// NewSSEReader returns a reader for an alt=sse stream.
func NewSSEReader(model string, opts llm.ReaderOptions) *SSEReader {
	r := &SSEReader{snapshot: snapshot{model: model, counter: opts.TokenCounter()},
		dec: *sse.NewDecoder(sse.Options{MaxEventBytes: opts.MaxBuffer})}
	return r
}

func (r *SSEReader) onEvent(ev sse.Event) {
	if ev.Truncated {
		r.observed += llm.ObservedTokens(int64(ev.DataLen))
		return
	}
	r.readEvent(ev.Data, true)
}

// readEvent reads one payload. With scan, a well-formed part is read
// with the scanner, which decodes escaped text without allocating; gjson
// reads everything else, and every part when scan is false (the reading
// the scanner's is tested against).
func (r *SSEReader) readEvent(data []byte, scan bool) {
	doc := gjson.Parse(llm.View(data))
	usages := 0
	doc.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "usageMetadata", "usage_metadata":
			// One per event, under either name: a second is read
			// differently by different clients.
			if usages++; usages > 1 {
				r.unreadable = true
			}
			r.apply(v)
		case "candidates":
			v.ForEach(func(_, c gjson.Result) bool {
				c.ForEach(func(k, v gjson.Result) bool {
					switch k.Str {
					case "content":
						v.Get("parts").ForEach(func(_, p gjson.Result) bool {
							if scan && r.scanPart(p) {
								return true
							}
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

// partNames are the members of a part the reader counts.
var partNames = []string{"text", "functionCall"}

// scanPart counts a well-formed part's text and function call, and
// reports false, having counted nothing, for one it leaves to gjson.
func (r *SSEReader) scanPart(p gjson.Result) bool {
	var v [2][]byte
	if !p.IsObject() || !llm.JSONMembers(llm.BytesView(p.Raw), partNames, v[:]) {
		return false
	}
	r.buf = r.buf[:0]
	text, _ := llm.JSONText(v[0], &r.buf)
	r.count(text)
	if v[1] != nil {
		r.count(llm.View(v[1]))
	}
	if cap(r.buf) > maxKeptBuf {
		r.buf = nil
	}
	return true
}

// Write implements llm.UsageReader. (The method value r.onEvent does
// not escape the decoder's Write, so it costs no allocation.)
func (r *SSEReader) Write(p []byte) { r.dec.Write(p, r.onEvent) }

// Usage implements llm.UsageReader: the last snapshot.
func (r *SSEReader) Usage() (accounting.Usage, bool) { return r.usage() }

// ObservedOutputTokens implements llm.UsageReader.
func (r *SSEReader) ObservedOutputTokens() int64 { return r.observed }

// Final implements llm.UsageReader: a snapshot is final once a
// finishReason came with it.
func (r *SSEReader) Final() bool { return r.has && r.final && !r.unreadable }

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
	r.scan.OnRepeatedUsage = r.onRepeatedUsage
	return r
}

func (r *JSONReader) onUsage(obj []byte) { r.apply(gjson.Parse(llm.View(obj))) }

// onRepeatedUsage: a response with two usageMetadata members has no
// usage settlement may trust.
func (r *JSONReader) onRepeatedUsage() { r.unreadable = true }

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

// Final implements llm.UsageReader, as for SSEReader.
func (r *JSONReader) Final() bool { return r.has && r.final && !r.unreadable }
