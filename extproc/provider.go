package extproc

import (
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
// a 429 of the provider's own (not one of Envoy's), and the remaining
// figures of its rate-limit headers, which the response headers phase
// removes afterwards. A figure that is not a plain whole number is
// ignored: the headers come from the upstream, and a garbled one must
// not block anyone.
func providerState(status int, from origin, h *extprocv3.HttpHeaders) (accounting.ProviderState, bool) {
	var ps accounting.ProviderState
	if from != fromUpstream {
		return ps, false
	}
	ps.RateLimited = status == 429
	for _, hv := range h.GetHeaders().GetHeaders() {
		var tokens bool
		switch {
		case contains(remainingTokensHeaders, hv.Key):
			tokens = true
		case contains(remainingRequestsHeaders, hv.Key):
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

// parseFigure reads a header's value (raw, or the string Envoy's older
// clients send) as a whole number in [0, maxProviderFigure].
func parseFigure(raw []byte, s string) (int64, bool) {
	if len(raw) == 0 {
		raw = []byte(s)
	}
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
