package extproc

import (
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/anthropic"
)

// The rate-limit headers beside the OpenAI-style x-ratelimit-* trio,
// from the same figures (the tightest limit of each dimension, after this
// request's reservation):
//
//   - IETF (Options.IETFRateLimitHeaders): RateLimit-Policy and RateLimit,
//     in the structured-field syntax of draft-ietf-httpapi-ratelimit-headers:
//     one item per dimension, named after it:
//     RateLimit-Policy: "tokens";q=50000;w=60, "requests";q=600;w=60
//     RateLimit: "tokens";r=1210;t=13, "requests";r=599;t=13
//     (cost in micro-dollars, as the store counts it).
//   - Anthropic's own family on Anthropic routes (unless
//     Options.NoAnthropicRateLimitHeaders): anthropic-ratelimit-requests-*
//     and anthropic-ratelimit-tokens-* (-limit, -remaining, and -reset as
//     an RFC 3339 time), the names Anthropic's SDK reads — so that it sees
//     the caller's limits, not the provider account's, which are removed.

// ietfUnits are the quota units of the dimensions, in order
// ("concurrent-requests" is the draft's own unit for a concurrency
// quota).
var ietfUnits = [numDims]string{"requests", "tokens", "usd-micros", "concurrent-requests"}

// wantsStandardHeaders reports whether a response of api gets any of
// these families: the common case (IETF off, not Anthropic) costs a
// response nothing more.
func (s *Server) wantsStandardHeaders(api llm.API) bool {
	return s.opts.IETFRateLimitHeaders || s.anthropicHeaders(api)
}

func (s *Server) anthropicHeaders(api llm.API) bool {
	_, ok := api.(anthropic.Messages)
	return ok && !s.opts.NoAnthropicRateLimitHeaders
}

// standardRateLimitHeaders appends the IETF and Anthropic headers the
// options ask for to out.
func (s *Server) standardRateLimitHeaders(api llm.API, dims *[numDims]accounting.DimState, out []*corev3.HeaderValueOption) []*corev3.HeaderValueOption {
	if s.opts.IETFRateLimitHeaders {
		out = appendIETF(dims, out)
	}
	if s.anthropicHeaders(api) {
		out = appendAnthropic(dims, time.Now(), out)
	}
	return out
}

func appendIETF(dims *[numDims]accounting.DimState, out []*corev3.HeaderValueOption) []*corev3.HeaderValueOption {
	var policy, state []byte
	for i := range dims {
		st := &dims[i]
		if !st.Applied {
			continue
		}
		if len(policy) > 0 {
			policy = append(policy, ", "...)
			state = append(state, ", "...)
		}
		name := accounting.Dimension(i).String()
		policy = strconv.AppendQuote(policy, name)
		policy = append(policy, ";q="...)
		policy = strconv.AppendInt(policy, st.Limit, 10)
		policy = append(policy, ";qu="...)
		policy = strconv.AppendQuote(policy, ietfUnits[i])
		policy = append(policy, ";w="...)
		policy = strconv.AppendInt(policy, ceilSeconds(st.Window), 10)
		state = strconv.AppendQuote(state, name)
		state = append(state, ";r="...)
		state = strconv.AppendInt(state, max(0, st.Remaining), 10)
		state = append(state, ";t="...)
		state = strconv.AppendInt(state, ceilSeconds(st.Reset), 10)
	}
	if len(policy) == 0 {
		return out
	}
	return append(out,
		&corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "ratelimit-policy", RawValue: policy}},
		&corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "ratelimit", RawValue: state}})
}

func appendAnthropic(dims *[numDims]accounting.DimState, now time.Time, out []*corev3.HeaderValueOption) []*corev3.HeaderValueOption {
	for _, d := range []accounting.Dimension{accounting.Requests, accounting.Tokens} {
		st := &dims[d]
		if !st.Applied {
			continue
		}
		prefix := "anthropic-ratelimit-" + d.String() + "-"
		reset := now.Add(st.Reset).UTC().Truncate(time.Second)
		if now.Add(st.Reset).After(reset) {
			reset = reset.Add(time.Second)
		}
		out = append(out,
			setHeader(prefix+"limit", strconv.FormatInt(st.Limit, 10)),
			setHeader(prefix+"remaining", strconv.FormatInt(max(0, st.Remaining), 10)),
			setHeader(prefix+"reset", strings.TrimSpace(reset.Format(time.RFC3339))))
	}
	return out
}

// ceilSeconds rounds a duration up to whole seconds: a client told to
// wait must not come back early.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
