package envoy

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The end-to-end tests: an HTTP client → a real Envoy 1.40 on the shipped
// envoy.yaml → the tokenwarden binary → the fakellm binary (e2e_helpers_test.go
// runs them). fakellm reports exactly the usage a test asks for
// (x-fakellm-input-tokens, x-fakellm-output-tokens), so every counter a test
// reads back has one right value.

// Usage fakellm reports when a test does not need anything else.
const (
	e2eInput  = 250
	e2eOutput = 37
)

// e2eFixedUsage are the fakellm headers that make it report e2eInput + e2eOutput.
var e2eFixedUsage = []string{"x-fakellm-input-tokens", strconv.Itoa(e2eInput), "x-fakellm-output-tokens", strconv.Itoa(e2eOutput)}

// e2eLogNumber returns a numeric field of an access log line.
func e2eLogNumber(t *testing.T, line map[string]any, key string) int64 {
	t.Helper()
	f, ok := line[key].(float64)
	if !ok {
		t.Fatalf("access log %s: got %v (%T), want a number (line %v)", key, line[key], line[key], line)
	}
	return int64(f)
}

// TestE2EAdmitted sends an admitted request, JSON and streamed, and checks what
// the client receives: the upstream's answer with tokenwarden's rate-limit
// headers in place of the provider's, and one access log line that carries
// what tokenwarden reported through dynamic metadata.
func TestE2EAdmitted(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newE2ECaller(t)
			tag := c.tenant
			// fakellm adds OpenAI's own account-wide x-ratelimit-* headers:
			// the client must see tokenwarden's figures instead, once each.
			resp := r.mustSend(t, c, e2eChat(t, "What is a PDU session?", 100, stream), tag,
				append([]string{"x-fakellm-ratelimit-headers", "true"}, e2eFixedUsage...)...)
			e2eWantStatus(t, resp, http.StatusOK)
			line := accessLogLine(t, r.envoy.stdout, tag)
			est := e2eLogNumber(t, line, "tw_estimate_tokens")

			for h, want := range map[string]int64{
				"x-ratelimit-limit-tokens":       e2eTenantTokens,
				"x-ratelimit-remaining-tokens":   e2eTenantTokens - est,
				"x-ratelimit-limit-requests":     e2eUserRequests,
				"x-ratelimit-remaining-requests": e2eUserRequests - 1,
			} {
				if got := e2eIntHeader(t, resp, h); got != want {
					t.Errorf("%s: got %d, want %d", h, got, want)
				}
			}
			for _, h := range []string{"x-ratelimit-reset-tokens", "x-ratelimit-reset-requests"} {
				vs := resp.header.Values(h)
				if len(vs) != 1 {
					t.Errorf("%s: got %q, want one value", h, vs)
					continue
				}
				if d, err := time.ParseDuration(vs[0]); err != nil || d <= 0 || d > 31*24*time.Hour {
					t.Errorf("%s: got %q, want a Go duration within the 31d window", h, vs[0])
				}
			}

			if !stream {
				var body struct {
					Usage struct {
						Prompt     int `json:"prompt_tokens"`
						Completion int `json:"completion_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal(resp.body, &body); err != nil {
					t.Fatalf("body: %v\n%s", err, resp.body)
				}
				if body.Usage.Prompt != e2eInput || body.Usage.Completion != e2eOutput {
					t.Errorf("upstream usage: got %+v, want %d and %d", body.Usage, e2eInput, e2eOutput)
				}
			} else {
				if ct := resp.header.Get("content-type"); !strings.HasPrefix(ct, "text/event-stream") {
					t.Errorf("content-type: got %q, want text/event-stream", ct)
				}
				events := e2eSSEData(resp.body)
				if len(events) < 2 || events[len(events)-1] != "[DONE]" {
					t.Fatalf("stream: got %d events ending %q, want a complete stream ending [DONE]:\n%s", len(events), events[max(len(events)-1, 0):], resp.body)
				}
				// The client did not ask for stream usage: tokenwarden added
				// stream_options.include_usage to the body (and fixed its
				// content-length), and the real Envoy carried the edit.
				if !strings.Contains(events[len(events)-2], fmt.Sprintf(`"total_tokens":%d`, e2eInput+e2eOutput)) {
					t.Errorf("last event before [DONE]: got %s, want the usage chunk tokenwarden asked for", events[len(events)-2])
				}
			}

			for k, want := range map[string]any{
				"status":                  float64(http.StatusOK),
				"tenant":                  c.tenant,
				"user":                    c.user,
				"tw_api":                  "openai.chat",
				"tw_model":                "gpt-4o-mini",
				"tw_actual_input_tokens":  float64(e2eInput),
				"tw_actual_output_tokens": float64(e2eOutput),
				"tw_actual_tokens":        float64(e2eInput + e2eOutput),
				"tw_settled_on":           "usage",
			} {
				if line[k] != want {
					t.Errorf("access log %s: got %v, want %v", k, line[k], want)
				}
			}
			if est < 100 {
				t.Errorf("access log tw_estimate_tokens: got %d, want at least max_tokens 100", est)
			}
			if s, _ := line["tw_reservation"].(string); s == "" {
				t.Errorf("access log tw_reservation: got %v, want the reservation id", line["tw_reservation"])
			}
			if line["upstream"] != r.llmAddr {
				t.Errorf("access log upstream: got %v, want fakellm at %s", line["upstream"], r.llmAddr)
			}
		})
	}
}

// TestE2ESettledChargeSeenOnNextRequest sends the same request twice: the
// second one's remaining budget shows the first settled at the usage fakellm
// reported, not at its estimate. The contract says settlement happens before
// the reply to the response's last message, so the second request may follow
// the first at once, also after a stream. The large cases make Envoy hand the
// response to tokenwarden in many chunks, with the usage in the last of them
// (JSON) or in an event after 80 KB ones (SSE).
func TestE2ESettledChargeSeenOnNextRequest(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	cases := []struct {
		name          string
		stream        bool
		maxTokens     int
		input, output int
		chunks        int
	}{
		{name: "json", maxTokens: 500, input: e2eInput, output: e2eOutput, chunks: 4},
		{name: "stream", stream: true, maxTokens: 500, input: e2eInput, output: e2eOutput, chunks: 4},
		{name: "json 240 KB", maxTokens: 100000, input: 1234, output: 60000, chunks: 4},
		{name: "stream 240 KB", stream: true, maxTokens: 100000, input: 1234, output: 60000, chunks: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newE2ECaller(t)
			body := e2eChat(t, "Explain token buckets in one paragraph.", tc.maxTokens, tc.stream)
			usage := []string{"x-fakellm-input-tokens", strconv.Itoa(tc.input), "x-fakellm-output-tokens", strconv.Itoa(tc.output),
				"x-fakellm-chunks", strconv.Itoa(tc.chunks)}
			first := r.mustSend(t, c, body, "", usage...)
			e2eWantStatus(t, first, http.StatusOK)
			second := r.mustSend(t, c, body, "", usage...)
			e2eWantStatus(t, second, http.StatusOK)
			// remaining₁ = L − est; remaining₂ = L − actual₁ − est.
			r1, r2 := e2eIntHeader(t, first, "x-ratelimit-remaining-tokens"), e2eIntHeader(t, second, "x-ratelimit-remaining-tokens")
			if got, want := r1-r2, int64(tc.input+tc.output); got != want {
				t.Errorf("first request's charge seen by the second: got %d (remaining %d then %d), want its usage %d (estimate %d)",
					got, r1, r2, want, e2eTenantTokens-r1)
			}
		})
	}
}

// TestE2EUpstreamErrorRefunds checks that an upstream error status books zero
// tokens and keeps the request, and that the error still reaches the client
// with tokenwarden's rate-limit headers.
func TestE2EUpstreamErrorRefunds(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t)
	body := e2eChat(t, "hello", 300, false)
	failed := r.mustSend(t, c, body, "", "x-fakellm-status", "503")
	e2eWantStatus(t, failed, http.StatusServiceUnavailable)
	r1 := e2eIntHeader(t, failed, "x-ratelimit-remaining-tokens")
	next := r.mustSend(t, c, body, "")
	e2eWantStatus(t, next, http.StatusOK)
	// remaining₁ = L − est; remaining₂ = L − 0 − est.
	if r2 := e2eIntHeader(t, next, "x-ratelimit-remaining-tokens"); r2 != r1 {
		t.Errorf("remaining tokens after an upstream 503: got %d, want %d (the 503 charged nothing)", r2, r1)
	}
	if got := e2eIntHeader(t, next, "x-ratelimit-remaining-requests"); got != e2eUserRequests-2 {
		t.Errorf("remaining requests: got %d, want %d (the 503 keeps its request)", got, e2eUserRequests-2)
	}
}

// TestE2ERateLimited trips a limit and checks the 429 as the client receives
// it through Envoy: status, headers, the OpenAI error body, and no upstream
// call. A request larger than the limit's capacity gets the never-fits form.
func TestE2ERateLimited(t *testing.T) {
	t.Parallel()
	r := e2e(t)

	t.Run("retry later", func(t *testing.T) {
		t.Parallel()
		c := newE2ECaller(t, "tight")
		body := e2eChat(t, "Write a long story.", 2000, false)
		// The first request settles at 2500 tokens, leaving 500 of 3000.
		first := r.mustSend(t, c, body, c.tenant+"-ok", "x-fakellm-input-tokens", "1500", "x-fakellm-output-tokens", "1000")
		e2eWantStatus(t, first, http.StatusOK)
		est := e2eLogNumber(t, accessLogLine(t, r.envoy.stdout, c.tenant+"-ok"), "tw_estimate_tokens")
		if est > e2eTightTokens || est <= 500 {
			t.Fatalf("estimate %d: the test needs one that fits %d but not the 500 left", est, e2eTightTokens)
		}

		tag := c.tenant + "-429"
		resp := r.mustSend(t, c, body, tag)
		e2eWantStatus(t, resp, http.StatusTooManyRequests)
		if ct := resp.header.Get("content-type"); ct != "application/json" {
			t.Errorf("content-type: got %q, want application/json", ct)
		}
		if cl := resp.header.Get("content-length"); cl != strconv.Itoa(len(resp.body)) {
			t.Errorf("content-length: got %q, want %d", cl, len(resp.body))
		}
		if got := resp.header.Get("x-tokenwarden-limit"); got != e2eTightName {
			t.Errorf("x-tokenwarden-limit: got %q, want %s", got, e2eTightName)
		}
		for h, want := range map[string]int64{
			"x-ratelimit-limit-tokens":     e2eTightTokens,
			"x-ratelimit-remaining-tokens": 500,
		} {
			if got := e2eIntHeader(t, resp, h); got != want {
				t.Errorf("%s: got %d, want %d", h, got, want)
			}
		}
		// A sliding window of 1m counts in 6 s slots: the 2500 tokens free
		// between 60 and 66 s after they were booked.
		retry := e2eIntHeader(t, resp, "retry-after")
		retryMs := e2eIntHeader(t, resp, "retry-after-ms")
		if retry < 1 || retry > 66 {
			t.Errorf("retry-after: got %d, want 1..66 s", retry)
		}
		if want := int64(math.Ceil(float64(retryMs) / 1000)); retry != want {
			t.Errorf("retry-after %d and retry-after-ms %d: want retry-after = ceil(ms/1000) = %d", retry, retryMs, want)
		}
		if reset, err := time.ParseDuration(resp.header.Get("x-ratelimit-reset-tokens")); err != nil || reset <= 0 {
			t.Errorf("x-ratelimit-reset-tokens: got %q, want a positive Go duration", resp.header.Get("x-ratelimit-reset-tokens"))
		}
		// A sliding minute's refusal is a wait the SDKs take (they wait up
		// to two minutes, extproc.DefaultShouldRetryMax): never told not
		// to retry.
		if v := resp.header.Values("x-should-retry"); len(v) != 0 {
			t.Errorf("x-should-retry: got %q for retry-after %d, want none", v, retry)
		}
		if at, err := time.Parse(time.RFC3339, resp.header.Get("x-tokenwarden-reset-at")); err != nil || at.Before(time.Now()) {
			t.Errorf("x-tokenwarden-reset-at: got %q, want an RFC 3339 time to come", resp.header.Get("x-tokenwarden-reset-at"))
		}
		var e struct {
			Error struct{ Message, Type, Code string }
		}
		if err := json.Unmarshal(resp.body, &e); err != nil {
			t.Fatalf("body: %v\n%s", err, resp.body)
		}
		if e.Error.Type != "tokens" || e.Error.Code != "rate_limit_exceeded" {
			t.Errorf("error type/code: got %q/%q, want tokens/rate_limit_exceeded (body %s)", e.Error.Type, e.Error.Code, resp.body)
		}
		for _, want := range []string{e2eTightName, "tokens", "3000", strconv.FormatInt(est, 10)} {
			if !strings.Contains(e.Error.Message, want) {
				t.Errorf("error message %q does not mention %q", e.Error.Message, want)
			}
		}
		line := accessLogLine(t, r.envoy.stdout, tag)
		if line["upstream"] != nil {
			t.Errorf("access log upstream: got %v, want none (fakellm must not be called)", line["upstream"])
		}
		if line["tw_limit"] != e2eTightName || line["status"] != float64(http.StatusTooManyRequests) {
			t.Errorf("access log: got status %v limit %v, want 429 and %s", line["status"], line["tw_limit"], e2eTightName)
		}
		t.Logf("429 as received: retry-after %d, details %v, body %s", retry, line["details"], resp.body)
	})

	t.Run("never fits", func(t *testing.T) {
		t.Parallel()
		c := newE2ECaller(t, "tight")
		resp := r.mustSend(t, c, e2eChat(t, "hi", 5000, false), "")
		e2eWantStatus(t, resp, http.StatusTooManyRequests)
		if got := resp.header.Get("x-should-retry"); got != "false" {
			t.Errorf("x-should-retry: got %q, want false", got)
		}
		for _, h := range []string{"retry-after", "retry-after-ms"} {
			if v := resp.header.Values(h); len(v) != 0 {
				t.Errorf("%s: got %q, want none on a request that can never fit", h, v)
			}
		}
		if got := resp.header.Get("x-tokenwarden-limit"); got != e2eTightName {
			t.Errorf("x-tokenwarden-limit: got %q, want %s", got, e2eTightName)
		}
		if got := e2eIntHeader(t, resp, "x-ratelimit-remaining-tokens"); got != e2eTightTokens {
			t.Errorf("x-ratelimit-remaining-tokens: got %d, want the untouched %d", got, e2eTightTokens)
		}
	})
}

// TestE2ECutStreams ends requests before their response's last message: the
// client hangs up after two content chunks, or before the response headers,
// or the upstream drops the connection after two chunks. Envoy then resets
// the ext_proc stream, and tokenwarden must settle the reservation on what
// it could see. A streamed response cut short is charged the input estimate
// plus the output that went by (basis estimate): what reached the client is
// what was generated, give or take a chunk. A request cut before any
// response is charged its whole reservation (basis reserved): it was
// forwarded, and the provider may be generating all of it. tokenwarden's
// "settled" log record for the request's reservation shows when and on what
// basis; the next request's remaining budget shows the charge.
func TestE2ECutStreams(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	const maxTokens = 1000
	// 10 chunks of 4 output tokens each ("the fox ran far " is 16 bytes: 4
	// tokens at 4 chars per token).
	chunks := []string{"x-fakellm-chunks", "10", "x-fakellm-output-tokens", "40"}

	// readChunks reads an SSE stream until n content chunks have arrived.
	readChunks := func(t *testing.T, body io.Reader, n int) {
		t.Helper()
		br := bufio.NewReader(body)
		for got := 0; got < n; {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the stream after %d content chunks: %v", got, err)
			}
			if e2eContentChunk(line) {
				got++
			}
		}
	}

	cases := []struct {
		name   string
		stream bool
		// call makes the request as the client and returns once the
		// response is over for the client.
		call func(t *testing.T, c e2eCaller, body []byte, tag string)
		// basis is the settlement's: "reserved" keeps the whole
		// reservation, "estimate" charges input plus the output seen.
		basis string
		// The output tokens tokenwarden may have charged: the range of
		// the charge above the input estimate. fakellm's text is 4 bytes
		// per real token; the server's calibrated approximation counts
		// its short words up to about twice that, so maxOut allows 2×.
		minOut, maxOut int64
		// flags are the access log %RESPONSE_FLAGS% that may mark the
		// request (one of them must).
		flags []string
	}{
		{
			name:   "client hangs up mid-stream",
			stream: true,
			call: func(t *testing.T, c e2eCaller, body []byte, tag string) {
				// 150 ms before each chunk: the client is gone long before
				// the end.
				resp, err := r.open(t, t.Context(), c, body, tag, append([]string{"x-fakellm-chunk-delay", "150ms"}, chunks...)...)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close() // the connection closes mid-stream
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status: got %d, want 200", resp.StatusCode)
				}
				readChunks(t, resp.Body, 2)
			},
			// The client read two chunks, which tokenwarden had passed
			// (STREAMED: Envoy forwards a chunk only after its reply); a
			// chunk or two more may have reached it before the reset,
			// never all ten.
			basis: "estimate", minOut: 8, maxOut: 72,
			flags: []string{"DC"}, // downstream connection termination
		},
		{
			name:   "HTTP/2 client resets its stream",
			stream: true,
			call: func(t *testing.T, c e2eCaller, body []byte, tag string) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel() // RST_STREAM; the connection stays up
				resp, err := r.openH2(t, ctx, c, body, tag, append([]string{"x-fakellm-chunk-delay", "150ms"}, chunks...)...)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
					t.Fatalf("got %s %d, want HTTP/2 200", resp.Proto, resp.StatusCode)
				}
				readChunks(t, resp.Body, 2)
			},
			basis: "estimate", minOut: 8, maxOut: 72,
			flags: []string{"DR"}, // downstream remote reset
		},
		{
			name: "client gives up before the response",
			call: func(t *testing.T, c e2eCaller, body []byte, tag string) {
				ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
				defer cancel()
				resp, err := r.open(t, ctx, c, body, tag, "x-fakellm-chunk-delay", "3s")
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got a response (%d) before fakellm's 3 s delay, want the client's timeout", resp.StatusCode)
				}
			},
			// No response seen, though the provider got the request: it
			// may have generated, and billed, up to the cap, so the whole
			// reservation stands.
			basis: "reserved", minOut: maxTokens, maxOut: maxTokens,
			flags: []string{"DC"},
		},
		{
			name:   "upstream drops the stream",
			stream: true,
			call: func(t *testing.T, c e2eCaller, body []byte, tag string) {
				// The delay lets the response headers reach the client
				// before the cut; a reset while tokenwarden still holds
				// them makes Envoy answer 502 itself.
				resp, err := r.open(t, t.Context(), c, body, tag,
					append([]string{"x-fakellm-cut-after", "2", "x-fakellm-chunk-delay", "50ms"}, chunks...)...)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status: got %d, want 200 (the cut comes after the headers)", resp.StatusCode)
				}
				rest, err := io.ReadAll(resp.Body)
				if err == nil || strings.Contains(string(rest), "[DONE]") {
					t.Fatalf("got a complete stream (err %v), want one the upstream cut:\n%s", err, rest)
				}
			},
			// fakellm sent two chunks and then dropped the connection;
			// Envoy may reset the ext_proc stream before tokenwarden has
			// read them.
			basis: "estimate", minOut: 0, maxOut: 16,
			// fakellm's HTTP/1.1 chunked body ends without its last chunk:
			// Envoy 1.40 logs an upstream protocol error (UPE); a reset
			// (UR) would say the same.
			flags: []string{"UPE", "UR"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newE2ECaller(t)
			body := e2eChat(t, "Count slowly to ten.", maxTokens, tc.stream)
			tag := c.tenant + "-cut"
			tc.call(t, c, body, tag)
			cutAt := time.Now()

			line := accessLogLine(t, r.envoy.stdout, tag)
			settled := r.awaitSettled(t, line, 5*time.Second)
			t.Logf("settled within %v of the cut", time.Since(cutAt).Round(time.Millisecond))
			if settled["basis"] != tc.basis {
				t.Errorf("settled on %v, want %s (log record %v)", settled["basis"], tc.basis, settled)
			}
			flags, _ := line["flags"].(string)
			if !slices.ContainsFunc(tc.flags, func(f string) bool { return strings.Contains(flags, f) }) {
				t.Errorf("access log flags: got %v, want one of %v", line["flags"], tc.flags)
			}

			// The same request again, in full. Its estimate (from its
			// access log line) is the cut request's too, and its remaining
			// figure is L − charged − estimate.
			next := r.mustSend(t, c, body, tag+"-next")
			e2eWantStatus(t, next, http.StatusOK)
			est := e2eLogNumber(t, accessLogLine(t, r.envoy.stdout, tag+"-next"), "tw_estimate_tokens")
			inputEst := est - maxTokens
			charged := e2eTenantTokens - est - e2eIntHeader(t, next, "x-ratelimit-remaining-tokens")
			if charged < inputEst+tc.minOut || charged > inputEst+tc.maxOut {
				t.Errorf("cut request charged %d, want its input estimate %d plus %d..%d output tokens (its estimate was %d)",
					charged, inputEst, tc.minOut, tc.maxOut, est)
			}
			t.Logf("cut request charged %d: input estimate %d + %d output", charged, inputEst, charged-inputEst)
		})
	}
}

// TestE2ETokenwardenKilled kills tokenwarden with SIGKILL while Envoy runs.
// With failure_mode_allow: false nothing may reach the upstream unmetered:
// new requests get Envoy's local 500 (what Envoy 1.40 answers when it cannot
// open the ext_proc stream), and a stream in flight is cut. When tokenwarden
// is back on the same port, traffic flows again within a few seconds, without
// restarting Envoy.
//
// It runs serially: the other e2e tests share this tokenwarden.
func TestE2ETokenwardenKilled(t *testing.T) {
	r := e2e(t)
	c := newE2ECaller(t)
	body := e2eChat(t, "hello", 100, false)
	e2eWantStatus(t, r.mustSend(t, c, body, ""), http.StatusOK)

	// A stream in flight when tokenwarden dies.
	inflight, err := r.open(t, t.Context(), c, e2eChat(t, "hello", 100, true), "",
		"x-fakellm-chunks", "10", "x-fakellm-chunk-delay", "200ms")
	if err != nil {
		t.Fatal(err)
	}
	defer inflight.Body.Close()
	if inflight.StatusCode != http.StatusOK {
		t.Fatalf("in-flight stream status: got %d, want 200", inflight.StatusCode)
	}
	first, err := bufio.NewReader(inflight.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "data: ") {
		t.Fatalf("in-flight stream: first line %q, %v", first, err)
	}

	old := r.killTokenwarden()
	killedAt := time.Now()
	t.Cleanup(func() {
		// Whatever happened above, leave a tokenwarden for the other tests.
		if r.tokenwarden().exited() {
			if err := r.restartTokenwarden(old); err != nil {
				t.Errorf("restarting tokenwarden: %v", err)
			}
		}
	})

	rest, err := io.ReadAll(inflight.Body)
	if err == nil || strings.Contains(string(rest), "[DONE]") {
		t.Errorf("in-flight stream: got the rest (%d bytes, err %v), want it cut when tokenwarden died", len(rest), err)
	}

	// While tokenwarden is down: Envoy's own 500, empty, and fakellm never
	// reached (no x-request-id of its own, no upstream host in the log).
	for i := range 3 {
		tag := fmt.Sprintf("%s-dead-%d", c.tenant, i)
		resp := r.mustSend(t, c, body, tag)
		if resp.status != http.StatusInternalServerError || len(resp.body) != 0 {
			t.Errorf("request %d with tokenwarden dead: got %d %q, want Envoy's empty 500 (status_on_error, failure_mode_allow false)", i, resp.status, resp.body)
		}
		if id := resp.header.Get("x-request-id"); strings.HasPrefix(id, "req_") {
			t.Errorf("request %d with tokenwarden dead reached fakellm (x-request-id %s)", i, id)
		}
		for _, h := range []string{"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens"} {
			if v := resp.header.Get(h); v != "" {
				t.Errorf("request %d with tokenwarden dead: %s %q, want none", i, h, v)
			}
		}
		line := accessLogLine(t, r.envoy.stdout, tag)
		if line["upstream"] != nil {
			t.Errorf("request %d: access log upstream %v, want none", i, line["upstream"])
		}
		if d, _ := line["details"].(string); !strings.HasPrefix(d, "ext_proc_error_gRPC_error_14") {
			t.Errorf("request %d: access log details %q, want ext_proc_error_gRPC_error_14 (UNAVAILABLE)…", i, d)
		}
		if i == 0 {
			t.Logf("tokenwarden dead: Envoy answered %d, body %q, details %v", resp.status, resp.body, line["details"])
		}
	}

	if err := r.restartTokenwarden(old); err != nil {
		t.Fatal(err)
	}
	if got := r.tokenwarden().listen; got != old.listen {
		t.Fatalf("restarted tokenwarden listens on %s, want %s where Envoy's cluster points", got, old.listen)
	}
	restartedAt := time.Now()
	for {
		resp, err := r.send(t, c, body, "")
		if err == nil && resp.status == http.StatusOK {
			if resp.header.Get("x-ratelimit-remaining-tokens") == "" {
				t.Errorf("after recovery: no x-ratelimit-remaining-tokens, want tokenwarden metering again")
			}
			break
		}
		if time.Since(restartedAt) > 5*time.Second {
			t.Fatalf("no 200 within 5 s of tokenwarden's restart: last %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("down %v; traffic recovered %v after the restart", restartedAt.Sub(killedAt).Round(time.Millisecond),
		time.Since(restartedAt).Round(time.Millisecond))
}

// TestE2ETokenwardenDrains sends tokenwarden SIGTERM while a stream is in
// flight: the stream runs to its end within shutdown_grace (5 s in the rig)
// and settles on its usage, and the process exits 0. Then it starts again on
// the same port.
//
// It runs serially: the other e2e tests share this tokenwarden.
func TestE2ETokenwardenDrains(t *testing.T) {
	r := e2e(t)
	c := newE2ECaller(t)
	tag := c.tenant + "-drain"
	resp, err := r.open(t, t.Context(), c, e2eChat(t, "hello", 100, true), tag,
		"x-fakellm-chunks", "5", "x-fakellm-chunk-delay", "100ms", "x-fakellm-input-tokens", "250", "x-fakellm-output-tokens", "40")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d, want 200", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if first, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(first, "data: ") {
		t.Fatalf("first line %q, %v", first, err)
	}

	old := r.tokenwarden()
	t.Cleanup(func() {
		if r.tokenwarden().exited() {
			if err := r.restartTokenwarden(old); err != nil {
				t.Errorf("restarting tokenwarden: %v", err)
			}
		}
	})
	if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "[DONE]") {
		t.Errorf("in-flight stream after SIGTERM: got %d bytes, err %v, want it to run to [DONE] within the grace period", len(rest), err)
	}
	select {
	case <-old.done:
	case <-time.After(10 * time.Second):
		t.Fatal("tokenwarden still running 10 s after SIGTERM (grace 5 s)")
	}
	if code := old.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status after SIGTERM: got %d, want 0\n%s", code, old.stderr.String())
	}
	line := accessLogLine(t, r.envoy.stdout, tag)
	if line["tw_settled_on"] != "usage" || line["tw_actual_tokens"] != float64(250+40) {
		t.Errorf("access log: settled on %v with %v tokens, want usage and 290", line["tw_settled_on"], line["tw_actual_tokens"])
	}

	if err := r.restartTokenwarden(old); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := r.send(t, c, e2eChat(t, "hello", 100, false), "")
		if err == nil && resp.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 200 within 5 s of tokenwarden's restart: last %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2ELargeBody sends a 2 MiB request body (with "Expect: 100-continue",
// as curl sends large bodies), twice the listener's
// per_connection_buffer_limit_bytes: the virtual host's
// request_body_buffer_limit must let it through Envoy's BUFFERED ext_proc to
// tokenwarden whole (its estimate counts all of it) and on to the upstream
// unchanged.
func TestE2ELargeBody(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t)
	content := strings.Repeat("the fox ran far ", 2<<20/16)
	body := e2eChat(t, content, 100, false)
	if len(body) <= 2<<20 {
		t.Fatalf("body is %d bytes, want over 2 MiB", len(body))
	}
	// As curl sends a body this large: Envoy must answer the 100-continue
	// itself and then buffer the body for tokenwarden.
	tag := c.tenant
	resp := r.mustSend(t, c, body, tag, "expect", "100-continue")
	e2eWantStatus(t, resp, http.StatusOK)

	// fakellm reports body bytes / 4 input tokens: it got every byte.
	var got struct {
		Usage struct {
			Prompt int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(resp.body, &got); err != nil {
		t.Fatalf("body: %v\n%.300s", err, resp.body)
	}
	if want := len(body) / 4; got.Usage.Prompt != want {
		t.Errorf("upstream saw %d input tokens, want %d (a %d-byte body, unchanged)", got.Usage.Prompt, want, len(body))
	}
	line := accessLogLine(t, r.envoy.stdout, tag)
	est := e2eLogNumber(t, line, "tw_estimate_tokens")
	if min := int64(len(content)/4 + 100); est < min {
		t.Errorf("estimate: got %d, want at least %d (the whole content at 4 chars per token, plus max_tokens)", est, min)
	}
	if got, want := e2eIntHeader(t, resp, "x-ratelimit-remaining-tokens"), int64(e2eTenantTokens)-est; got != want {
		t.Errorf("x-ratelimit-remaining-tokens: got %d, want %d", got, want)
	}
	if got := e2eLogNumber(t, line, "bytes_received"); got != int64(len(body)) {
		t.Errorf("access log bytes_received: got %d, want %d", got, len(body))
	}
}

// TestE2EIdentityFromJWT checks that the identity tokenwarden meters is the one
// jwt_authn verified: identity headers a client sends are ignored, a token
// that does not verify never reaches tokenwarden, and an attribute read from
// jwt_authn's dynamic metadata (user, from the payload's sub) keys its limit.
func TestE2EIdentityFromJWT(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	body := e2eChat(t, "Who am I?", 100, false)

	t.Run("client-sent identity headers ignored", func(t *testing.T) {
		t.Parallel()
		attacker, victim := newE2ECaller(t), newE2ECaller(t)
		forged := []string{"x-tenant-id", victim.tenant, "x-user-id", victim.user, "x-tier", "tight"}
		tag := attacker.tenant + "-forged"
		resp := r.mustSend(t, attacker, body, tag, append(forged, e2eFixedUsage...)...)
		e2eWantStatus(t, resp, http.StatusOK)
		// The tight tier's 3000 would show here had x-tier been believed.
		if got := e2eIntHeader(t, resp, "x-ratelimit-limit-tokens"); got != e2eTenantTokens {
			t.Errorf("x-ratelimit-limit-tokens: got %d, want %d (the forged x-tier must not apply)", got, e2eTenantTokens)
		}
		line := accessLogLine(t, r.envoy.stdout, tag)
		if line["tenant"] != attacker.tenant {
			t.Errorf("access log tenant: got %v, want the token's %s", line["tenant"], attacker.tenant)
		}
		est := e2eLogNumber(t, line, "tw_estimate_tokens")

		// The victim's counters are untouched; the attacker's hold the charge.
		v := r.mustSend(t, victim, body, "")
		e2eWantStatus(t, v, http.StatusOK)
		if got, want := e2eIntHeader(t, v, "x-ratelimit-remaining-tokens"), e2eTenantTokens-est; got != want {
			t.Errorf("victim's remaining tokens: got %d, want %d (only its own request)", got, want)
		}
		if got := e2eIntHeader(t, v, "x-ratelimit-remaining-requests"); got != e2eUserRequests-1 {
			t.Errorf("victim's remaining requests: got %d, want %d", got, e2eUserRequests-1)
		}
		a := r.mustSend(t, attacker, body, "")
		e2eWantStatus(t, a, http.StatusOK)
		if got, want := e2eIntHeader(t, a, "x-ratelimit-remaining-tokens"), e2eTenantTokens-int64(e2eInput+e2eOutput)-est; got != want {
			t.Errorf("attacker's remaining tokens: got %d, want %d (its first request charged to it)", got, want)
		}
	})

	t.Run("no token, forged header", func(t *testing.T) {
		t.Parallel()
		victim := newE2ECaller(t)
		tag := victim.tenant + "-anon"
		resp := r.mustSend(t, e2eCaller{}, body, tag, "x-tenant-id", victim.tenant, "x-user-id", victim.user)
		e2eWantStatus(t, resp, http.StatusUnauthorized)
		var e struct {
			Error struct{ Type, Code string }
		}
		if err := json.Unmarshal(resp.body, &e); err != nil || e.Error.Code != "missing_identity" || e.Error.Type != "invalid_request_error" {
			t.Errorf("body: got %s (%v), want tokenwarden's missing_identity error", resp.body, err)
		}
		if line := accessLogLine(t, r.envoy.stdout, tag); line["upstream"] != nil {
			t.Errorf("access log upstream: got %v, want none", line["upstream"])
		}
	})

	t.Run("token from an unknown key", func(t *testing.T) {
		t.Parallel()
		victim := newE2ECaller(t)
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		// Right issuer, audience and key id; only the signature is wrong.
		forged := victim
		forged.token = e2eSignToken(t, key, map[string]any{"tenant": victim.tenant, "sub": victim.user, "tier": "standard"})
		resp := r.mustSend(t, forged, body, "")
		e2eWantStatus(t, resp, http.StatusUnauthorized)
		if !strings.Contains(string(resp.body), "Jwt verification fails") {
			t.Errorf("body: got %q, want jwt_authn's verification failure", resp.body)
		}
		// Nothing was charged to the tenant the token named.
		v := r.mustSend(t, victim, body, "")
		e2eWantStatus(t, v, http.StatusOK)
		if got := e2eIntHeader(t, v, "x-ratelimit-remaining-requests"); got != e2eUserRequests-1 {
			t.Errorf("victim's remaining requests: got %d, want %d", got, e2eUserRequests-1)
		}
	})

	t.Run("user from the verified payload", func(t *testing.T) {
		t.Parallel()
		alice := newE2ECaller(t)
		bob := alice
		bob.user = "bob-" + alice.tenant
		bob.token = mintDemoToken(t, map[string]any{"tenant": bob.tenant, "sub": bob.user, "tier": bob.tier})
		for i, step := range []struct {
			who  e2eCaller
			want int64
		}{{alice, e2eUserRequests - 1}, {alice, e2eUserRequests - 2}, {bob, e2eUserRequests - 1}} {
			// A forged x-user-id changes nothing: user is read from metadata.
			resp := r.mustSend(t, step.who, body, "", "x-user-id", "mallory")
			e2eWantStatus(t, resp, http.StatusOK)
			if got := e2eIntHeader(t, resp, "x-ratelimit-remaining-requests"); got != step.want {
				t.Errorf("request %d as %s: remaining requests got %d, want %d", i, step.who.user, got, step.want)
			}
		}
	})
}

// e2eContentChunk reports whether an SSE line is a chat completion chunk
// that carries generated text.
func e2eContentChunk(line string) bool {
	data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
	if !ok {
		return false
	}
	var chunk struct {
		Choices []struct {
			Delta struct{ Content string }
		}
	}
	return json.Unmarshal([]byte(data), &chunk) == nil && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != ""
}

// e2eSignToken signs an ES256 JWT with key, under the issuer, audience and
// key id of envoy.yaml's demo provider: a token only the signature betrays.
func e2eSignToken(t *testing.T, key *ecdsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	p := demoProvider(t)
	var set jwks
	if err := json.Unmarshal([]byte(p.GetLocalJwks().GetInlineString()), &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("inline JWKS: %v", err)
	}
	all := map[string]any{"iss": p.GetIssuer(), "aud": p.GetAudiences()[0]}
	for k, v := range claims {
		all[k] = v
	}
	header, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": set.Keys[0].Kid})
	payload, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	input := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	sum := sha256.Sum256([]byte(input))
	rr, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	rr.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64.EncodeToString(sig)
}
