package extproc

import (
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// headerNames are the x-ratelimit-* header names per dimension, built
// once rather than concatenated on every response. Never modified.
var headerNames = func() (n [3][3]string) {
	for d := range n {
		name := accounting.Dimension(d).String()
		n[d] = [3]string{"x-ratelimit-limit-" + name, "x-ratelimit-remaining-" + name, "x-ratelimit-reset-" + name}
	}
	return n
}()

// providerHeaderPrefixes start the names of the rate-limit headers the
// supported providers send about their own account: OpenAI's and its
// compatibles' (Azure OpenAI, Groq, xAI, vLLM) x-ratelimit-*, Anthropic's
// anthropic-ratelimit-* and its priority tier's anthropic-priority-*, and
// the IETF draft's RateLimit / RateLimit-Policy together with Mistral's
// ratelimitbysize-*. They describe the organisation's whole budget, not
// the caller's, and the SDKs act on them (Anthropic's reads its own to
// pace retries): a tenant must see tokenwarden's figures only. Gemini and
// Bedrock send no such headers. Never modified.
var providerHeaderPrefixes = []string{"x-ratelimit-", "anthropic-ratelimit-", "anthropic-priority-", "ratelimit"}

// providerRateLimitHeaders returns the names of the response headers
// that belong to a provider's own rate-limit families. Envoy removes
// headers by exact name only, so they are found in the response itself:
// a header the provider adds tomorrow under a known prefix is removed
// too. Header keys arrive lower-case.
func providerRateLimitHeaders(h *extprocv3.HttpHeaders) []string {
	var names []string
	for _, hv := range h.GetHeaders().GetHeaders() {
		for _, p := range providerHeaderPrefixes {
			if strings.HasPrefix(hv.Key, p) {
				names = append(names, hv.Key)
				break
			}
		}
	}
	return names
}

// formatReset renders a reset time the way OpenAI does: a Go duration,
// at millisecond precision ("120ms", "6m0s").
func formatReset(d time.Duration) string {
	return d.Round(time.Millisecond).String()
}

// rateLimitHeaders returns the x-ratelimit-* headers for each dimension
// that applied. Remaining is shown as zero when an extra charge took a
// counter below it: clients expect a count, not a debt. The entries are
// allocated together: this runs on every response.
func rateLimitHeaders(dims *[3]accounting.DimState, out []*corev3.HeaderValueOption) []*corev3.HeaderValueOption {
	n := 0
	for i := range dims {
		if dims[i].Applied {
			n += 3
		}
	}
	if n == 0 {
		return out
	}
	opts := make([]corev3.HeaderValueOption, n)
	vals := make([]corev3.HeaderValue, n)
	j := 0
	add := func(key, value string) {
		vals[j] = corev3.HeaderValue{Key: key, RawValue: []byte(value)}
		opts[j].Header = &vals[j]
		out = append(out, &opts[j])
		j++
	}
	for i := range dims {
		st := &dims[i]
		if !st.Applied {
			continue
		}
		d := accounting.Dimension(i)
		names := &headerNames[i]
		add(names[0], formatAmount(d, st.Limit))
		add(names[1], formatAmount(d, max(0, st.Remaining)))
		add(names[2], formatReset(st.Reset))
	}
	return out
}
