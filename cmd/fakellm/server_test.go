package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// newTestServer serves fakellm's handler for the test.
func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(newHandler(slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(srv.Close)
	return srv
}

// result is one answered request: status, headers, the body as far as it could
// be read, and the read error (an aborted stream has one).
type result struct {
	status  int
	header  http.Header
	body    string
	readErr error
}

// call POSTs body to path with the given headers.
func call(t *testing.T, srv *httptest.Server, path, body string, headers map[string]string) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, readErr := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: string(b), readErr: readErr}
}

// decodeJSON unmarshals a response body into a generic map.
func decodeJSON(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("response is not a JSON object: %v\n%s", err, body)
	}
	return m
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	name, data string
}

// parseSSE splits a complete event stream into events. It accepts LF and CRLF
// line ends and requires every event to be terminated by a blank line, which
// is what fakellm must produce.
func parseSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	body = strings.ReplaceAll(body, "\r\n", "\n")
	if body != "" && !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", body[max(0, len(body)-40):])
	}
	var evs []sseEvent
	for _, block := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		if block == "" {
			continue
		}
		var ev sseEvent
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			default:
				t.Fatalf("unexpected SSE line %q", line)
			}
		}
		evs = append(evs, ev)
	}
	return evs
}

// num reads a JSON number at a path of keys in a decoded value.
func num(t *testing.T, v any, keys ...string) int {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("at %q: got %T, want an object", k, v)
		}
		v = m[k]
	}
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("at %v: got %v (%T), want a number", keys, v, v)
	}
	return int(f)
}

// checkErrorStatus runs the x-fakellm-status checks every API shares: the status and
// the provider's error body come back, and with wantRetryAfter a rate-limit reply
// carries retry-after (OpenAI and Anthropic send it; Gemini puts RetryInfo in
// the body instead).
func checkErrorStatus(t *testing.T, srv *httptest.Server, path, body string, wantRetryAfter bool, check func(t *testing.T, status int, m map[string]any)) {
	t.Helper()
	for _, status := range []int{400, 401, 429, 500, 503} {
		r := call(t, srv, path, body, map[string]string{hdrStatus: strconv.Itoa(status)})
		if r.status != status {
			t.Errorf("%s %s=%d: status got %d, want %d", path, hdrStatus, status, r.status, status)
			continue
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("status %d: content-type %q, want application/json", status, ct)
		}
		if got := r.header.Get("Retry-After") != ""; status == 429 && got != wantRetryAfter {
			t.Errorf("status 429: retry-after present %v, want %v", got, wantRetryAfter)
		}
		check(t, status, decodeJSON(t, r.body))
	}
}

// TestParseControls covers the header parsing and its errors.
func TestParseControls(t *testing.T) {
	cases := []struct {
		name    string
		headers map[string]string
		want    controls
		wantErr string
	}{
		{"defaults", nil, controls{inputTokens: -1, outputTokens: defaultOutputTokens, chunks: defaultChunks, cutAfter: -1}, ""},
		{"all set", map[string]string{
			hdrInputTokens: "100", hdrCachedTokens: "40", hdrOutputTokens: "7", hdrChunks: "3",
			hdrChunkDelay: "15ms", hdrStatus: "429", hdrRateLimitHeaders: "true", hdrCutAfter: "2",
		}, controls{inputTokens: 100, cachedTokens: 40, outputTokens: 7, chunks: 3, chunkDelay: 15 * time.Millisecond,
			status: 429, rateLimitHeaders: true, cutAfter: 2}, ""},
		{"zero chunks", map[string]string{hdrChunks: "0"}, controls{}, hdrChunks},
		{"negative tokens", map[string]string{hdrOutputTokens: "-1"}, controls{}, hdrOutputTokens},
		{"not a number", map[string]string{hdrInputTokens: "many"}, controls{}, hdrInputTokens},
		{"huge count", map[string]string{hdrOutputTokens: "99999999999"}, controls{}, hdrOutputTokens},
		{"bad duration", map[string]string{hdrChunkDelay: "5"}, controls{}, hdrChunkDelay},
		{"bad bool", map[string]string{hdrRateLimitHeaders: "yes please"}, controls{}, hdrRateLimitHeaders},
		{"status out of range", map[string]string{hdrStatus: "700"}, controls{}, hdrStatus},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range c.headers {
				h.Set(k, v)
			}
			got, err := parseControls(h)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got error %v, want one naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestPlan covers the usage a request gets.
func TestPlan(t *testing.T) {
	base := controls{inputTokens: -1, outputTokens: 16, chunks: 4, cutAfter: -1}
	cases := []struct {
		name      string
		ctl       controls
		bodyLen   int
		maxOutput int
		want      usage
	}{
		{"input from body size", base, 401, 0, usage{input: 100, output: 16}},
		{"input from header", controls{inputTokens: 7, outputTokens: 16}, 4000, 0, usage{input: 7, output: 16}},
		{"cap truncates", base, 40, 5, usage{input: 10, output: 5, truncated: true}},
		{"cap above output", base, 40, 100, usage{input: 10, output: 16}},
		{"cached capped at input", controls{inputTokens: 3, cachedTokens: 9, outputTokens: 1}, 0, 0, usage{input: 3, cached: 3, output: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.ctl.plan(c.bodyLen, c.maxOutput); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestChunkTexts checks the generated text: 4 bytes per token, split evenly.
func TestChunkTexts(t *testing.T) {
	cases := []struct {
		tokens, chunks int
		wantLens       []int
	}{
		{8, 4, []int{8, 8, 8, 8}},
		{10, 4, []int{12, 12, 8, 8}},
		{2, 4, []int{4, 4, 0, 0}},
		{0, 2, []int{0, 0}},
	}
	for _, c := range cases {
		got := chunkTexts(c.tokens, c.chunks)
		var lens []int
		for _, s := range got {
			lens = append(lens, len(s))
		}
		if !equalInts(lens, c.wantLens) {
			t.Errorf("chunkTexts(%d, %d): got lengths %v, want %v", c.tokens, c.chunks, lens, c.wantLens)
		}
		if joined := strings.Join(got, ""); len(joined) != 4*c.tokens {
			t.Errorf("chunkTexts(%d, %d): got %d bytes in all, want %d", c.tokens, c.chunks, len(joined), 4*c.tokens)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHealthz checks the liveness endpoint.
func TestHealthz(t *testing.T) {
	srv := newTestServer(t)
	resp, err := srv.Client().Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status got %d, want 200", resp.StatusCode)
	}
}

// TestChunkDelay checks streams pace their content chunks.
func TestChunkDelay(t *testing.T) {
	srv := newTestServer(t)
	start := time.Now()
	r := call(t, srv, "/v1/chat/completions", `{"model":"m","stream":true}`, map[string]string{hdrChunks: "3", hdrChunkDelay: "40ms"})
	if r.status != 200 || r.readErr != nil {
		t.Fatalf("status %d, read error %v", r.status, r.readErr)
	}
	if d := time.Since(start); d < 120*time.Millisecond {
		t.Errorf("3 chunks at 40ms took %v, want at least 120ms", d)
	}
}

// TestLargeBody checks a body of tens of MiB is read and counted.
func TestLargeBody(t *testing.T) {
	srv := newTestServer(t)
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 33<<20) + `"}]}`
	r := call(t, srv, "/v1/chat/completions", body, nil)
	if r.status != 200 {
		t.Fatalf("status got %d, want 200", r.status)
	}
	if got := num(t, decodeJSON(t, r.body), "usage", "prompt_tokens"); got != len(body)/4 {
		t.Errorf("prompt_tokens got %d, want %d (bytes/4)", got, len(body)/4)
	}
}
