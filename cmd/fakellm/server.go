package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// maxBodyBytes bounds a request body. It is above what the shipped Envoy config
// lets through (48 MiB), so that Envoy, not fakellm, is what rejects a big body.
const maxBodyBytes = 128 << 20

// newHandler routes the provider APIs fakellm imitates.
func newHandler(log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { serveChat(log, w, r, "") })
	// Azure OpenAI names the deployment in the path and ignores the body's model.
	mux.HandleFunc("POST /openai/deployments/{deployment}/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		serveChat(log, w, r, r.PathValue("deployment"))
	})
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) { serveResponses(log, w, r) })
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) { serveMessages(log, w, r) })
	// Gemini puts model and method in one path segment: models/gemini-2.5-flash:generateContent.
	// The mux unescapes the segment, as Google's front end does: ...%3AgenerateContent
	// and ...%3agenerateContent are the same call.
	mux.HandleFunc("POST /v1beta/models/{call}", func(w http.ResponseWriter, r *http.Request) { serveGemini(log, w, r) })
	mux.HandleFunc("POST /v1/models/{call}", func(w http.ResponseWriter, r *http.Request) { serveGemini(log, w, r) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	return mux
}

// errorWriter answers with an API's error body for the given status.
type errorWriter func(w http.ResponseWriter, status int, msg string)

// readRequest parses the control headers and reads the body. On failure it has
// already answered (in the API's error shape) and returns ok false.
func readRequest(w http.ResponseWriter, r *http.Request, fail errorWriter) (ctl controls, body []byte, ok bool) {
	ctl, err := parseControls(r.Header)
	if err != nil {
		fail(w, http.StatusBadRequest, "fakellm: "+err.Error())
		return ctl, nil, false
	}
	body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(w, http.StatusRequestEntityTooLarge, "request body too large")
		} else {
			fail(w, http.StatusBadRequest, "reading request body: "+err.Error())
		}
		return ctl, nil, false
	}
	if ctl.resetBeforeHeaders {
		// The whole request was read; now the connection drops before any
		// response byte (net/http closes it on this panic).
		panic(http.ErrAbortHandler)
	}
	return ctl, body, true
}

// writeJSON answers status with v as JSON. With ctl.cutAfter set it sends only the
// first half of the body and then drops the connection, as an upstream that dies
// mid-response would.
func writeJSON(w http.ResponseWriter, ctl controls, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // all values are built here from plain types
	}
	w.Header().Set("Content-Type", "application/json")
	if ctl.cutAfter >= 0 {
		w.WriteHeader(status)
		w.Write(b[:len(b)/2])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}
	w.WriteHeader(status)
	w.Write(b)
}

// sleep waits d or until ctx ends; it reports whether the wait completed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// words make up the generated text: each is three letters and a space, so the text
// of n output tokens is 4n bytes and a chars/4 estimate of it is exact.
var words = []string{"the ", "fox ", "ran ", "far ", "and ", "sat ", "sun ", "set "}

// chunkTexts splits the text of n output tokens into chunks pieces, as evenly as
// possible (pieces are empty when there are more chunks than tokens).
func chunkTexts(n, chunks int) []string {
	out := make([]string, chunks)
	w := 0
	for i := range out {
		k := n / chunks
		if i < n%chunks {
			k++
		}
		var sb strings.Builder
		for range k {
			sb.WriteString(words[w%len(words)])
			w++
		}
		out[i] = sb.String()
	}
	return out
}

// fullText is the whole generated text of n output tokens.
func fullText(n int) string { return strings.Join(chunkTexts(n, 1), "") }

// streamFormat is how a stream frames its events.
type streamFormat int

const (
	sseLF     streamFormat = iota // server-sent events, lines ending in LF (OpenAI, Anthropic)
	sseCRLF                       // server-sent events, lines ending in CRLF (Gemini)
	jsonArray                     // one JSON array sent element by element (Gemini without alt=sse)
)

// stream writes a streamed response event by event, flushing each, with the chunk
// delay before every content event and the connection dropped after cutAfter
// content events.
type stream struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	ctx      context.Context
	ctl      controls
	format   streamFormat
	frames   int // events sent so far
	contents int // content events sent so far
}

// startStream sends the response headers of a stream.
func startStream(w http.ResponseWriter, r *http.Request, ctl controls, format streamFormat) *stream {
	if format == jsonArray {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	} else {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: http.NewResponseController(w), ctx: r.Context(), ctl: ctl, format: format}
	s.rc.Flush()
	return s
}

// event sends one event; name may be empty for data-only streams (and is not
// sent in a JSON array). data is a string sent verbatim or a value sent as JSON.
// It reports false when the client has gone away.
func (s *stream) event(name string, data any) bool {
	var payload []byte
	switch d := data.(type) {
	case string:
		payload = []byte(d)
	default:
		var err error
		if payload, err = json.Marshal(d); err != nil {
			panic(err)
		}
	}
	var sb strings.Builder
	switch s.format {
	case jsonArray:
		if s.frames == 0 {
			sb.WriteString("[")
		} else {
			sb.WriteString(",\r\n")
		}
		sb.Write(payload)
	default:
		eol := "\n"
		if s.format == sseCRLF {
			eol = "\r\n"
		}
		if name != "" {
			sb.WriteString("event: " + name + eol)
		}
		sb.WriteString("data: ")
		sb.Write(payload)
		sb.WriteString(eol + eol)
	}
	s.frames++
	if _, err := io.WriteString(s.w, sb.String()); err != nil {
		return false
	}
	return s.rc.Flush() == nil && s.ctx.Err() == nil
}

// end closes the JSON array of a jsonArray stream; SSE streams need nothing.
func (s *stream) end() {
	if s.format != jsonArray {
		return
	}
	if s.frames == 0 {
		io.WriteString(s.w, "[")
	}
	io.WriteString(s.w, "]")
}

// content sends a content event after the chunk delay, counting it toward cutAfter.
func (s *stream) content(name string, data any) bool {
	if !sleep(s.ctx, s.ctl.chunkDelay) {
		return false
	}
	if !s.event(name, data) {
		return false
	}
	s.contents++
	return true
}

// cutHere drops the connection when the cut point has been reached: after
// cutAfter content events, or, for a cut beyond the last content event, right
// after it (before the events that close the stream). total is the number of
// content events the stream has.
func (s *stream) cutHere(total int) {
	if s.ctl.cutAfter < 0 {
		return
	}
	if s.contents >= s.ctl.cutAfter || s.contents >= total {
		s.rc.Flush()
		// net/http closes the connection without the terminating chunk (HTTP/1.1)
		// or resets the stream (HTTP/2): the client sees a truncated body.
		panic(http.ErrAbortHandler)
	}
}

// newID returns prefix followed by random hex, like the providers' object ids.
func newID(prefix string) string {
	var b [12]byte
	for i := range b {
		b[i] = byte(rand.N(256))
	}
	return prefix + hex.EncodeToString(b[:])
}

// logRequest records what fakellm answered.
func logRequest(log *slog.Logger, r *http.Request, api, model string, stream bool, status int, u usage) {
	log.Info("request", "api", api, "path", r.URL.Path, "model", model, "stream", stream, "status", status,
		"input_tokens", u.reportedInput(), "cached_tokens", u.cached, "output_tokens", u.reportedOutput(u.output), "truncated", u.truncated)
}

// errorMessage is the message of an error reply triggered by x-fakellm-status.
func errorMessage(status int) string {
	if status == http.StatusTooManyRequests {
		return "Rate limit reached (fakellm: requested with " + hdrStatus + ")"
	}
	return fmt.Sprintf("fakellm: status %d requested with %s", status, hdrStatus)
}
