package main

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Request headers that steer one fakellm response. All are optional.
const (
	// hdrInputTokens sets the input (prompt) token count reported in usage,
	// cached tokens included. Default: request body bytes / 4. Any other JSON
	// number than an integer in [0, maxCount] (1e30, -5, 2.5) is reported
	// verbatim, as an upstream with a bug or a grudge might.
	hdrInputTokens = "x-fakellm-input-tokens"
	// hdrCachedTokens sets how many of the input tokens were cache reads. Default 0.
	hdrCachedTokens = "x-fakellm-cached-tokens"
	// hdrOutputTokens sets how many output tokens the model "generates". Default
	// defaultOutputTokens. The request's output cap (max_tokens and friends) still
	// wins: a smaller cap truncates the output and the finish reason says so.
	// Any other JSON number than an integer in [0, maxCount] is reported
	// verbatim as the output count of the final usage, over a text of
	// defaultOutputTokens.
	hdrOutputTokens = "x-fakellm-output-tokens"
	// hdrChunks sets the number of content chunks (stream events carrying text).
	// Default defaultChunks.
	hdrChunks = "x-fakellm-chunks"
	// hdrChunkDelay is a Go duration slept before each content chunk of a stream,
	// and once before a JSON response.
	hdrChunkDelay = "x-fakellm-chunk-delay"
	// hdrStatus makes fakellm answer with this HTTP status and the provider's error
	// body instead of a completion.
	hdrStatus = "x-fakellm-status"
	// hdrRateLimitHeaders ("true") adds the provider's own rate-limit headers
	// (x-ratelimit-* for OpenAI, anthropic-ratelimit-* for Anthropic; Gemini sends
	// none), with account-wide figures that tokenwarden must replace.
	hdrRateLimitHeaders = "x-fakellm-ratelimit-headers"
	// hdrRemainingTokens and hdrRemainingRequests set the remaining figures of
	// those headers (x-ratelimit-remaining-tokens and -requests for OpenAI;
	// anthropic-ratelimit-tokens-remaining, with the input and output figures
	// no higher, and -requests-remaining for Anthropic), a whole number in
	// [0, 1e15]; either one adds the headers. Default: an account far from
	// its limits.
	hdrRemainingTokens   = "x-fakellm-ratelimit-remaining-tokens"
	hdrRemainingRequests = "x-fakellm-ratelimit-remaining-requests"
	// hdrRetryAfter sets the retry-after, in whole seconds, of the 429 that
	// hdrStatus asks of OpenAI or Anthropic. Default 1. (Gemini sends none.)
	hdrRetryAfter = "x-fakellm-retry-after"
	// hdrCutAfter drops the connection after this many content chunks, before the
	// events that close the stream (so no final usage is ever sent). On a JSON
	// response it drops the connection half-way through the body.
	hdrCutAfter = "x-fakellm-cut-after"
	// hdrResetBeforeHeaders ("true") reads the whole request and then drops the
	// connection without a response: the upstream took the request (and a real
	// provider may have started to bill it) but the proxy gets no answer.
	hdrResetBeforeHeaders = "x-fakellm-reset-before-headers"
)

const (
	defaultOutputTokens = 16
	defaultChunks       = 4
	// maxCount bounds every count header so a typo cannot make fakellm build a
	// gigabyte of text.
	maxCount = 10_000_000
)

// controls is one request's parsed x-fakellm-* headers.
type controls struct {
	inputTokens      int // -1: derive from the body size
	cachedTokens     int
	outputTokens     int
	chunks           int
	chunkDelay       time.Duration
	status           int // 0: answer normally
	rateLimitHeaders bool
	// remainingTokens and remainingRequests are the remaining figures the
	// rate-limit headers state, as digits; "" means the defaults.
	remainingTokens, remainingRequests string
	// retryAfter is a 429's retry-after, as digits; "" means 1.
	retryAfter         string
	cutAfter           int // -1: never
	resetBeforeHeaders bool
	// inputLiteral and outputLiteral, when set, are JSON numbers reported
	// verbatim in place of the input and output counts.
	inputLiteral, outputLiteral string
}

// parseControls reads the x-fakellm-* headers of h. An unparsable header is an
// error, not a silent default: a test that misspells a value should fail loudly.
func parseControls(h http.Header) (controls, error) {
	c := controls{inputTokens: -1, outputTokens: defaultOutputTokens, chunks: defaultChunks, cutAfter: -1}
	ints := []struct {
		name string
		dst  *int
		min  int
	}{
		{hdrInputTokens, &c.inputTokens, 0},
		{hdrCachedTokens, &c.cachedTokens, 0},
		{hdrOutputTokens, &c.outputTokens, 0},
		{hdrChunks, &c.chunks, 1},
		{hdrCutAfter, &c.cutAfter, 0},
		{hdrStatus, &c.status, 100},
	}
	literals := map[string]*string{hdrInputTokens: &c.inputLiteral, hdrOutputTokens: &c.outputLiteral}
	for _, f := range ints {
		v := strings.TrimSpace(h.Get(f.name))
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err == nil && n >= f.min && n <= maxCount {
			*f.dst = n
			continue
		}
		if lit := literals[f.name]; lit != nil && isJSONNumber(v) {
			*lit = v
			continue
		}
		want := fmt.Sprintf("an integer in [%d, %d]", f.min, maxCount)
		if literals[f.name] != nil {
			want += " or a JSON number to report verbatim"
		}
		return controls{}, fmt.Errorf("%s: want %s, got %q", f.name, want, v)
	}
	if c.status != 0 && c.status > 599 {
		return controls{}, fmt.Errorf("%s: want an HTTP status, got %d", hdrStatus, c.status)
	}
	if v := h.Get(hdrChunkDelay); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return controls{}, fmt.Errorf("%s: want a Go duration such as 50ms, got %q", hdrChunkDelay, v)
		}
		c.chunkDelay = d
	}
	for name, dst := range map[string]*bool{hdrRateLimitHeaders: &c.rateLimitHeaders, hdrResetBeforeHeaders: &c.resetBeforeHeaders} {
		if v := h.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return controls{}, fmt.Errorf("%s: want true or false, got %q", name, v)
			}
			*dst = b
		}
	}
	for name, dst := range map[string]*string{hdrRemainingTokens: &c.remainingTokens, hdrRemainingRequests: &c.remainingRequests} {
		v := strings.TrimSpace(h.Get(name))
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1e15 || strconv.FormatInt(n, 10) != v {
			return controls{}, fmt.Errorf("%s: want a whole number in [0, 1e15], got %q", name, v)
		}
		*dst = v
		c.rateLimitHeaders = true
	}
	if v := strings.TrimSpace(h.Get(hdrRetryAfter)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 86400 || strconv.Itoa(n) != v {
			return controls{}, fmt.Errorf("%s: want whole seconds in [0, 86400], got %q", hdrRetryAfter, v)
		}
		c.retryAfter = v
	}
	return c, nil
}

// setRetryAfter gives the 429 the error writers send the retry-after the
// request asked for.
func (c controls) setRetryAfter(w http.ResponseWriter) {
	if c.retryAfter != "" && c.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", c.retryAfter)
	}
}

// remaining returns the figure a control set, or def.
func remaining(set, def string) string {
	if set != "" {
		return set
	}
	return def
}

// isJSONNumber reports whether s is one JSON number literal.
func isJSONNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return false
	}
	n, ok := v.(json.Number)
	return ok && n.String() == s
}

// usage is the token accounting of one fakellm answer, before each API maps it
// onto its own field names.
type usage struct {
	input     int // all input tokens, cached ones included
	cached    int // cache reads, a subset of input
	output    int // tokens generated
	truncated bool
	// inputLiteral and outputLiteral, when set, are reported in place of
	// input and output (see controls).
	inputLiteral, outputLiteral string
}

// plan decides the usage of a request whose body had bodyLen bytes and whose
// output cap (max_tokens or the API's equivalent) is maxOutput, 0 meaning none.
func (c controls) plan(bodyLen, maxOutput int) usage {
	u := usage{input: c.inputTokens, cached: c.cachedTokens, output: c.outputTokens,
		inputLiteral: c.inputLiteral, outputLiteral: c.outputLiteral}
	if c.outputLiteral != "" {
		u.output = defaultOutputTokens
	}
	if u.input < 0 {
		u.input = bodyLen / 4
	}
	if u.cached > u.input {
		u.cached = u.input
	}
	if maxOutput > 0 && u.output > maxOutput {
		u.output, u.truncated = maxOutput, true
	}
	return u
}

// reportedInput is the input count as usage reports it.
func (u usage) reportedInput() any {
	if u.inputLiteral != "" {
		return json.Number(u.inputLiteral)
	}
	return u.input
}

// reportedUncachedInput is the input count less cache reads, as Anthropic
// reports it. A literal input is reported as it is.
func (u usage) reportedUncachedInput() any {
	if u.inputLiteral != "" {
		return json.Number(u.inputLiteral)
	}
	return u.input - u.cached
}

// reportedOutput is the output count as usage reports it after soFar of the
// output tokens: the literal takes the place of the final count.
func (u usage) reportedOutput(soFar int) any {
	if u.outputLiteral != "" && soFar == u.output {
		return json.Number(u.outputLiteral)
	}
	return soFar
}

// reportedTotal is input plus the reported output after soFar tokens, exact
// also when a literal is involved.
func (u usage) reportedTotal(soFar int) any {
	in, out := u.reportedInput(), u.reportedOutput(soFar)
	if a, ok := in.(int); ok {
		if b, ok := out.(int); ok {
			return a + b
		}
	}
	return addNumbers(fmt.Sprint(in), fmt.Sprint(out))
}

// addNumbers adds two JSON number literals at 256 bits of precision (about
// 77 significant digits: 1e30 + 16 is exact, 1e400 + 16 is 1e+400). A
// literal beyond big.Float's exponent range makes the sum that literal.
func addNumbers(a, b string) json.Number {
	x, _, errA := big.ParseFloat(a, 10, 256, big.ToNearestEven)
	if errA != nil || x.IsInf() {
		return json.Number(a)
	}
	y, _, errB := big.ParseFloat(b, 10, 256, big.ToNearestEven)
	if errB != nil || y.IsInf() {
		return json.Number(b)
	}
	// 'g' output ("1.000000000000000000000000000016e+30") is valid JSON.
	return json.Number(x.Add(x, y).Text('g', -1))
}
