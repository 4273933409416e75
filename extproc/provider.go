package extproc

import (
	"net/http"
	"strconv"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// The provider's own figures of what its account has left, which correct
// the limits scoped by the provider attribute (see
// accounting.ProviderState). Anthropic also states its input and output
// token limits apart; its tokens figure is the most restrictive of them,
// which is what a limit on input plus output tokens compares with (an
// output figure alone, a fraction of the total, would cut such a limit
// to it). Never modified.
var (
	remainingTokensHeaders = []string{
		"x-ratelimit-remaining-tokens",
		"anthropic-ratelimit-tokens-remaining",
	}
	remainingRequestsHeaders = []string{
		"x-ratelimit-remaining-requests",
		"anthropic-ratelimit-requests-remaining",
	}
)

// maxProviderFigure bounds a remaining figure that is read: more than
// any limit can hold (a config limit is at most 1e15), so that a larger
// one corrects nothing rather than overflowing.
const maxProviderFigure = 1e15

// providerState reads what a response says about the provider's account:
// a 429 of the provider's own (not one of Envoy's) and how long it asks
// to wait, and the remaining figures of its rate-limit headers, which the
// response headers phase removes afterwards. A figure that is not a plain
// whole number is ignored: the headers come from the upstream, and a
// garbled one must not block anyone; a garbled retry-after is as none
// (the block is then accounting.MaxProviderBlock, its bound anyway). now
// dates a retry-after given as an HTTP date.
func providerState(status int, from origin, h *extprocv3.HttpHeaders, now time.Time) (accounting.ProviderState, bool) {
	var ps accounting.ProviderState
	if from != fromUpstream {
		return ps, false
	}
	ps.RateLimited = status == 429
	var afterMs bool // retry-after-ms read: it wins, as in the SDKs
	for _, hv := range h.GetHeaders().GetHeaders() {
		var tokens bool
		switch {
		case contains(remainingTokensHeaders, hv.Key):
			tokens = true
		case contains(remainingRequestsHeaders, hv.Key):
		case ps.RateLimited && hv.Key == "retry-after-ms":
			if d, ok := parseRetryAfterMs(value(hv.RawValue, hv.Value)); ok {
				ps.RetryAfter, ps.HasRetryAfter, afterMs = d, true, true
			}
			continue
		case ps.RateLimited && hv.Key == "retry-after" && !afterMs:
			if d, ok := parseRetryAfter(value(hv.RawValue, hv.Value), now); ok {
				ps.RetryAfter, ps.HasRetryAfter = d, true
			}
			continue
		default:
			continue
		}
		v, ok := parseFigure(hv.RawValue, hv.Value)
		if !ok {
			continue
		}
		switch {
		case tokens && (!ps.HasTokens || v < ps.RemainingTokens):
			ps.RemainingTokens, ps.HasTokens = v, true
		case !tokens && (!ps.HasRequests || v < ps.RemainingRequests):
			ps.RemainingRequests, ps.HasRequests = v, true
		}
	}
	return ps, ps.RateLimited || ps.HasTokens || ps.HasRequests
}

func contains(names []string, key string) bool {
	for _, n := range names {
		if n == key {
			return true
		}
	}
	return false
}

// value is a header's value: raw, or the string Envoy's older clients
// send.
func value(raw []byte, s string) []byte {
	if len(raw) == 0 {
		return []byte(s)
	}
	return raw
}

// parseRetryAfter reads a retry-after: a whole number of seconds, or an
// HTTP date, from now. Any wait beyond a day is a day: the block is
// bounded far below it.
func parseRetryAfter(v []byte, now time.Time) (time.Duration, bool) {
	if secs, ok := parseFigure(v, ""); ok {
		return time.Duration(min(secs, 86400)) * time.Second, true
	}
	if len(v) > 64 {
		return 0, false
	}
	t, err := http.ParseTime(string(v))
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), 24*time.Hour), true
}

// parseRetryAfterMs reads OpenAI's retry-after-ms: milliseconds, whole or
// with a fraction.
func parseRetryAfterMs(v []byte) (time.Duration, bool) {
	if len(v) == 0 || len(v) > 24 {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || !(f >= 0) || f > 86400e3 || v[0] < '0' || v[0] > '9' {
		return 0, false
	}
	return time.Duration(f * float64(time.Millisecond)), true
}

// parseFigure reads a header's value (raw, or the string Envoy's older
// clients send) as a whole number in [0, maxProviderFigure].
func parseFigure(raw []byte, s string) (int64, bool) {
	raw = value(raw, s)
	if len(raw) == 0 || len(raw) > 16 {
		return 0, false
	}
	var n int64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, n <= maxProviderFigure
}
