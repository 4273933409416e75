package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Request headers that steer one fakellm response. All are optional.
const (
	// hdrInputTokens sets the input (prompt) token count reported in usage,
	// cached tokens included. Default: request body bytes / 4.
	hdrInputTokens = "x-fakellm-input-tokens"
	// hdrCachedTokens sets how many of the input tokens were cache reads. Default 0.
	hdrCachedTokens = "x-fakellm-cached-tokens"
	// hdrOutputTokens sets how many output tokens the model "generates". Default
	// defaultOutputTokens. The request's output cap (max_tokens and friends) still
	// wins: a smaller cap truncates the output and the finish reason says so.
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
	// hdrCutAfter drops the connection after this many content chunks, before the
	// events that close the stream (so no final usage is ever sent). On a JSON
	// response it drops the connection half-way through the body.
	hdrCutAfter = "x-fakellm-cut-after"
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
	cutAfter         int // -1: never
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
	for _, f := range ints {
		v := h.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < f.min || n > maxCount {
			return controls{}, fmt.Errorf("%s: want an integer in [%d, %d], got %q", f.name, f.min, maxCount, v)
		}
		*f.dst = n
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
	if v := h.Get(hdrRateLimitHeaders); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return controls{}, fmt.Errorf("%s: want true or false, got %q", hdrRateLimitHeaders, v)
		}
		c.rateLimitHeaders = b
	}
	return c, nil
}

// usage is the token accounting of one fakellm answer, before each API maps it
// onto its own field names.
type usage struct {
	input     int // all input tokens, cached ones included
	cached    int // cache reads, a subset of input
	output    int // tokens generated
	truncated bool
}

// plan decides the usage of a request whose body had bodyLen bytes and whose
// output cap (max_tokens or the API's equivalent) is maxOutput, 0 meaning none.
func (c controls) plan(bodyLen, maxOutput int) usage {
	u := usage{input: c.inputTokens, cached: c.cachedTokens, output: c.outputTokens}
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
