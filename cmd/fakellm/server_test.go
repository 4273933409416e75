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
		{"negative cached tokens", map[string]string{hdrCachedTokens: "-1"}, controls{}, hdrCachedTokens},
		{"not a number", map[string]string{hdrInputTokens: "many"}, controls{}, hdrInputTokens},
		{"not a JSON number", map[string]string{hdrOutputTokens: "1e"}, controls{}, hdrOutputTokens},
		{"hex", map[string]string{hdrInputTokens: "0x10"}, controls{}, hdrInputTokens},
		{"two numbers", map[string]string{hdrInputTokens: "1 2"}, controls{}, hdrInputTokens},
		{"leading zero", map[string]string{hdrInputTokens: "01.5"}, controls{}, hdrInputTokens},
		{"huge chunk count", map[string]string{hdrChunks: "99999999999"}, controls{}, hdrChunks},
		{"literal input", map[string]string{hdrInputTokens: "1e30"},
			controls{inputTokens: -1, outputTokens: defaultOutputTokens, chunks: defaultChunks, cutAfter: -1, inputLiteral: "1e30"}, ""},
		{"literal outputs", map[string]string{hdrOutputTokens: "-5"},
			controls{inputTokens: -1, outputTokens: defaultOutputTokens, chunks: defaultChunks, cutAfter: -1, outputLiteral: "-5"}, ""},
		{"count beyond maxCount is a literal", map[string]string{hdrOutputTokens: "99999999999"},
			controls{inputTokens: -1, outputTokens: defaultOutputTokens, chunks: defaultChunks, cutAfter: -1, outputLiteral: "99999999999"}, ""},
		{"reset before headers", map[string]string{hdrResetBeforeHeaders: "true"},
			controls{inputTokens: -1, outputTokens: defaultOutputTokens, chunks: defaultChunks, cutAfter: -1, resetBeforeHeaders: true}, ""},
		{"bad reset", map[string]string{hdrResetBeforeHeaders: "soon"}, controls{}, hdrResetBeforeHeaders},
		{"bad duration", map[string]string{hdrChunkDelay: "5"}, controls{}, hdrChunkDelay},
		{"bad bool", map[string]string{hdrRateLimitHeaders: "yes please"}, controls{}, hdrRateLimitHeaders},
		{"status out of range", map[string]string{hdrStatus: "700"}, controls{}, hdrStatus},
		{"remaining figures", map[string]string{hdrRemainingTokens: "0", hdrRemainingRequests: "12"},
			controls{inputTokens: -1, outputTokens: defaultOutputTokens, chunks: defaultChunks, cutAfter: -1,
				rateLimitHeaders: true, remainingTokens: "0", remainingRequests: "12"}, ""},
		{"negative remaining", map[string]string{hdrRemainingTokens: "-1"}, controls{}, hdrRemainingTokens},
		{"remaining with a sign", map[string]string{hdrRemainingRequests: "+5"}, controls{}, hdrRemainingRequests},
		{"remaining too large", map[string]string{hdrRemainingTokens: "9999999999999999"}, controls{}, hdrRemainingTokens},
		{"retry-after", map[string]string{hdrRetryAfter: "7"},
			controls{inputTokens: -1, outputTokens: defaultOutputTokens, chunks: defaultChunks, cutAfter: -1, retryAfter: "7"}, ""},
		{"retry-after not whole seconds", map[string]string{hdrRetryAfter: "1.5"}, controls{}, hdrRetryAfter},
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
		{"literals carried", controls{inputTokens: -1, outputTokens: 16, inputLiteral: "1e30", outputLiteral: "-3"}, 40, 0,
			usage{input: 10, output: defaultOutputTokens, inputLiteral: "1e30", outputLiteral: "-3"}},
		{"literal output's text still capped", controls{inputTokens: 1, outputTokens: 16, outputLiteral: "2.5"}, 0, 5,
			usage{input: 1, output: 5, truncated: true, outputLiteral: "2.5"}},
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

// TestLiteralUsage checks a count that is no plain integer is reported
// verbatim, in each API's usage fields, streams included.
func TestLiteralUsage(t *testing.T) {
	srv := newTestServer(t)
	cases := []struct {
		name, path, body string
		headers          map[string]string
		want             []string // substrings of the raw response
	}{
		{"chat", chatPath, `{"model":"m"}`, map[string]string{hdrInputTokens: "1e30", hdrOutputTokens: "-5"},
			[]string{`"prompt_tokens":1e30`, `"completion_tokens":-5`, `"total_tokens":9.99999999999999999999999999995e+29`}},
		{"chat stream", chatPath, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
			map[string]string{hdrOutputTokens: "2.5", hdrInputTokens: "10"},
			[]string{`"completion_tokens":2.5`, `"total_tokens":12.5`}},
		{"responses", responsesPath, `{"model":"m","input":"x"}`, map[string]string{hdrInputTokens: "1E400"},
			[]string{`"input_tokens":1E400`, `"total_tokens":1e+400`}}, // 16 is below 256 bits of precision
		{"anthropic", messagesPath, `{"model":"c","max_tokens":100}`, map[string]string{hdrInputTokens: "-1", hdrOutputTokens: "99999999999"},
			[]string{`"input_tokens":-1`, `"output_tokens":99999999999`}},
		{"anthropic stream", messagesPath, `{"model":"c","max_tokens":100,"stream":true}`, map[string]string{hdrOutputTokens: "1e30"},
			[]string{`"output_tokens":1e30}`}},
		{"gemini", geminiGenerate, `{}`, map[string]string{hdrInputTokens: "1e30", hdrOutputTokens: "3"},
			[]string{`"promptTokenCount":1e30`, `"candidatesTokenCount":3`, `"totalTokenCount":1.000000000000000000000000000003e+30`}},
		{"beyond big.Float's range", chatPath, `{"model":"m"}`, map[string]string{hdrInputTokens: "1e9999999999"},
			[]string{`"prompt_tokens":1e9999999999`, `"total_tokens":1e9999999999`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, srv, c.path, c.body, c.headers)
			if r.status != 200 || r.readErr != nil {
				t.Fatalf("status %d, read error %v: %s", r.status, r.readErr, r.body)
			}
			for _, w := range c.want {
				if !strings.Contains(r.body, w) {
					t.Errorf("response lacks %s:\n%s", w, r.body)
				}
			}
		})
	}
}

// TestResetBeforeHeaders checks the connection drops after the request was
// read, before any response byte.
func TestResetBeforeHeaders(t *testing.T) {
	srv := newTestServer(t)
	body := `{"model":"m","messages":[]}`
	req, err := http.NewRequest(http.MethodPost, srv.URL+chatPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(hdrResetBeforeHeaders, "true")
	resp, err := srv.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got a response (%d), want the connection dropped before one", resp.StatusCode)
	}
}

// FuzzIsJSONNumber checks that what the count headers take as a literal is a
// JSON number and nothing more.
func FuzzIsJSONNumber(f *testing.F) {
	for _, s := range []string{"1e30", "-5", "2.5", "1E400", "0", "-0", "01", "1e", "0x10", "1 2", " 1", "+1", "NaN", "1.", ".5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !isJSONNumber(s) {
			return
		}
		var v any
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%q taken as a number, but: %v", s, err)
		}
		if n, ok := v.(json.Number); !ok || string(n) != s {
			t.Fatalf("%q taken as a number, decodes to %#v", s, v)
		}
	})
}
