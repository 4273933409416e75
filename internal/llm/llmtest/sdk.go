package llmtest

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// Recorder is an HTTP server for pointing a vendor's SDK at canned
// replies, so that a client nobody here wrote checks that tokenwarden's
// fixtures and replies read as the real API's. It answers every request
// with one handler and records when each attempt arrived, for checking
// the SDK's retries and their delays.
type Recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	times []time.Time
}

// NewRecorder starts a Recorder that answers with reply; it is closed
// when t ends.
func NewRecorder(t testing.TB, reply http.HandlerFunc) *Recorder {
	t.Helper()
	rec := &Recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.times = append(rec.times, time.Now())
		rec.mu.Unlock()
		reply(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

// URL is the server's base URL, http://host:port.
func (rec *Recorder) URL() string { return rec.srv.URL }

// Attempts returns when each request arrived, in order.
func (rec *Recorder) Attempts() []time.Time {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]time.Time(nil), rec.times...)
}

// CheckOneRetry checks that the SDK retried a LimitReply(_, true) once,
// and no sooner than its retry-after-ms asked.
func (rec *Recorder) CheckOneRetry(t *testing.T) {
	t.Helper()
	at := rec.Attempts()
	if len(at) != 2 {
		t.Fatalf("got %d attempts, want 2 (one retry)", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < retryAfter {
		t.Errorf("SDK retried after %v, want at least retry-after-ms %v", gap, retryAfter)
	}
}

// CheckNoRetry checks that the SDK did not retry a LimitReply(_, false).
func (rec *Recorder) CheckNoRetry(t *testing.T) {
	t.Helper()
	if n := len(rec.Attempts()); n != 1 {
		t.Errorf("got %d attempts, want 1: x-should-retry: false must stop retries", n)
	}
}

// Replay returns a handler that serves body, a fixture, as contentType.
func Replay(body []byte, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("content-type", contentType)
		_, _ = w.Write(body)
	}
}

// LimitMessage is a rate-limit message as extproc words it, for the
// replies the SDK tests render.
const LimitMessage = "Rate limit reached for tenant-tpm (tokens): limit 50000, requested 61000; retry in 2s"

// retryAfter is the retry-after-ms a retryable LimitReply sends: short, so
// the tests are quick, and the SDKs prefer it to retry-after.
const retryAfter = 150 * time.Millisecond

// LimitReply returns a handler that serves what extproc sends for a
// tripped limit: status 429, reply's body and headers and the rate-limit
// headers. A retryable reply says when to retry (retry-after, and a short
// retry-after-ms); one that can never fit says x-should-retry: false.
func LimitReply(reply llm.Reply, retry bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("content-type", "application/json")
		for _, kv := range reply.Headers {
			h.Set(kv[0], kv[1])
		}
		h.Set("x-ratelimit-limit-tokens", "50000")
		h.Set("x-ratelimit-remaining-tokens", "0")
		h.Set("x-ratelimit-reset-tokens", "1.5s")
		h.Set("x-tokenwarden-limit", "tenant-tpm")
		if retry {
			h.Set("retry-after", "2")
			h.Set("retry-after-ms", strconv.FormatInt(retryAfter.Milliseconds(), 10))
		} else {
			h.Set("x-should-retry", "false")
		}
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(reply.Body)
	}
}
