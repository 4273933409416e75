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
var headerNames = func() (n [numDims][3]string) {
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

// providerRateLimitHeaders appends to names the names of the response
// headers that belong to a provider's own rate-limit families. Envoy
// removes headers by exact name only, so they are found in the response
// itself: a header the provider adds tomorrow under a known prefix is
// removed too. Header keys arrive lower-case.
func providerRateLimitHeaders(h *extprocv3.HttpHeaders, names []string) []string {
	for _, hv := range h.GetHeaders().GetHeaders() {
		if isProviderRateLimitHeader(hv.Key) {
			names = append(names, hv.Key)
		}
	}
	return names
}

// isProviderRateLimitHeader reports whether name starts with one of
// providerHeaderPrefixes. It runs for every response header: the first
// byte rules out most names before any prefix is compared
// (FuzzProviderRateLimitHeader holds it to the list).
func isProviderRateLimitHeader(name string) bool {
	if name == "" {
		return false
	}
	switch name[0] {
	case 'x':
		return strings.HasPrefix(name, "x-ratelimit-")
	case 'a':
		return strings.HasPrefix(name, "anthropic-ratelimit-") || strings.HasPrefix(name, "anthropic-priority-")
	case 'r':
		return strings.HasPrefix(name, "ratelimit")
	}
	return false
}

// formatReset renders a reset time the way OpenAI does: a Go duration,
// at millisecond precision ("120ms", "6m0s").
func formatReset(d time.Duration) string {
	return string(appendReset(nil, d))
}

// appendReset appends formatReset(d) to dst.
func appendReset(dst []byte, d time.Duration) []byte {
	return appendDuration(dst, d.Round(time.Millisecond))
}

// appendDuration appends d as time.Duration's String renders it, without
// the allocation String makes: this runs three times on every response.
func appendDuration(dst []byte, d time.Duration) []byte {
	if d == 0 {
		return append(dst, "0s"...)
	}
	u := uint64(d)
	if d < 0 {
		dst = append(dst, '-')
		u = -u // the magnitude, also of the most negative duration
	}
	if u < uint64(time.Second) {
		// Below a second: one unit, with a fraction.
		switch {
		case u < uint64(time.Microsecond):
			return append(appendDecimal(dst, u), "ns"...)
		case u < uint64(time.Millisecond):
			return append(appendFraction(dst, u, 3), "µs"...)
		}
		return append(appendFraction(dst, u, 6), "ms"...)
	}
	// Hours, minutes and seconds, with a fraction of a second.
	secs := u / uint64(time.Second)
	if h := secs / 3600; h > 0 {
		dst = append(appendDecimal(dst, h), 'h')
	}
	if secs >= 60 {
		dst = append(appendDecimal(dst, secs/60%60), 'm')
	}
	return append(appendFraction(dst, u%uint64(time.Hour*1)%uint64(time.Minute), 9), 's')
}

// appendFraction appends v / 10^prec as a decimal, without trailing
// zeros in its fraction, and without a point when the fraction is zero.
func appendFraction(dst []byte, v uint64, prec int) []byte {
	pow := uint64(1)
	for range prec {
		pow *= 10
	}
	dst = appendDecimal(dst, v/pow)
	frac := v % pow
	if frac == 0 {
		return dst
	}
	dst = append(dst, '.')
	for pow /= 10; frac > 0; pow /= 10 {
		dst = append(dst, byte('0'+frac/pow))
		frac %= pow
	}
	return dst
}

// numDims is the number of accounting dimensions.
const numDims = len(accounting.Decision{}.Dims)

// rateLimitEntry is an x-ratelimit-* header of a reply built as
// messages (a rejection), allocated with the others of its reply.
type rateLimitEntry struct {
	opt corev3.HeaderValueOption
	val corev3.HeaderValue
	// text holds the value; one that outgrows it moves to the heap.
	text [24]byte
}

// rateLimitHeaders appends to out the x-ratelimit-* headers for each
// dimension that applied, as messages: entries for those dimensions
// alone, in one allocation.
func rateLimitHeaders(dims *[numDims]accounting.DimState, out []*corev3.HeaderValueOption) []*corev3.HeaderValueOption {
	n := 0
	for i := range dims {
		if dims[i].Applied {
			n += 3
		}
	}
	entries := make([]rateLimitEntry, n)
	j := 0
	for i := range dims {
		if !dims[i].Applied {
			continue
		}
		for k, name := range headerNames[i] {
			e := &entries[j]
			e.val = corev3.HeaderValue{Key: name, RawValue: appendRateLimitValue(e.text[:0], accounting.Dimension(i), k, &dims[i])}
			e.opt.Header = &e.val
			out = append(out, &e.opt)
			j++
		}
	}
	return out
}

// rateLimitValues returns the x-ratelimit-* headers of each dimension
// that applied, the first n of set, their values appended to text
// (which moves to the heap if it is too small).
func rateLimitValues(dims *[numDims]accounting.DimState, text []byte) (set [3 * numDims]wireHeader, n int) {
	for i := range dims {
		if !dims[i].Applied {
			continue
		}
		for k, name := range headerNames[i] {
			start := len(text)
			text = appendRateLimitValue(text, accounting.Dimension(i), k, &dims[i])
			set[n] = wireHeader{key: name, value: text[start:len(text):len(text)]}
			n++
		}
	}
	return set, n
}

// appendRateLimitValue appends the value of d's k-th x-ratelimit-*
// header (limit, remaining, reset; see headerNames). Remaining is shown
// as zero when an extra charge took a counter below it: clients expect
// a count, not a debt.
func appendRateLimitValue(dst []byte, d accounting.Dimension, k int, st *accounting.DimState) []byte {
	switch k {
	case 0:
		return appendAmount(dst, d, st.Limit)
	case 1:
		return appendAmount(dst, d, max(0, st.Remaining))
	}
	return appendReset(dst, st.Reset)
}
