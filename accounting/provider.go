package accounting

import (
	"context"
	"slices"
	"strings"
)

// AttributeProvider is the identity attribute that names the provider
// account a request is sent to (an upstream cluster, a route's
// provider). A limit scoped by it is an outbound provider limit: it
// models that account's own requests or tokens per window, across every
// tenant, and the provider's answers correct it (see [ProviderState]).
const AttributeProvider = "provider"

// ProviderLimit reports whether l is an outbound provider limit: scoped
// by [AttributeProvider], on requests or tokens, the dimensions
// providers state their own limits in.
func (l *Limit) ProviderLimit() bool {
	return (l.Dimension == Requests || l.Dimension == Tokens) && slices.Contains(l.Scope, AttributeProvider)
}

// perModel reports whether the limit counts one model at a time: scoped
// by the model attribute, or matched to one model.
func (l *Limit) perModel() bool {
	_, one := l.Match[AttributeModel]
	return one || slices.Contains(l.Scope, AttributeModel)
}

// validateProvider refuses a provider limit that counts several models
// on one counter. The providers state their figures per model (OpenAI,
// Anthropic) and refuse per model (Gemini, Bedrock too): one model's
// "0 left" or 429 would otherwise correct the counter every other model
// counts on, and shut them out with it.
func (l *Limit) validateProvider() error {
	if !l.ProviderLimit() || l.perModel() {
		return nil
	}
	fix := append(slices.Clone(l.Scope), AttributeModel)
	return FieldErrorf("scope", "a provider limit is corrected by the provider's figures and 429s, which are per model: "+
		"write scope: [%s] (or match one model)", strings.Join(fix, ", "))
}

// ProviderState is what a provider's response said about its account,
// read from its status and rate-limit headers before they are removed.
//
// It corrects the reservation's provider limits at settlement, in the
// same store call: what the provider says is left is the most the
// counter may show, and a correction only ever charges. Given a state,
// [Reservation.SettleProvider] books on each provider limit an extra
// charge that brings what the counter has left, once the settlement
// lands, down to what the provider says; never a refund, since the
// provider's figures cover traffic tokenwarden does not see, and a
// provider that counts differently must not hand out budget.
//
//   - RateLimited (the provider refused the request with a 429): every
//     provider limit of the request whose dimension the reply states no
//     remaining figure for (or a figure of 0) is charged up to its
//     capacity, which blocks that provider scope for every replica
//     sharing the store, for as long as a full counter of its algorithm
//     lasts: to the end of a
//     fixed window, for one window of a sliding window (the charge leaves
//     with its slot), until a token bucket has refilled what the next
//     request needs. The provider's retry-after is not a store figure:
//     a limit modelling the account over the provider's own window frees
//     about when the provider does.
//   - RemainingTokens, RemainingRequests (x-ratelimit-remaining-*,
//     anthropic-ratelimit-{tokens,requests}-remaining): a tokens or
//     requests limit is charged what it thinks is left beyond the
//     figure, on a 429 too. A provider answers 429 to a single request
//     too large for its per-minute limit whatever the account has spent
//     ("Request too large … Limit 30000, Requested 50000"); the figure
//     then says the account is not exhausted, and a block would let one
//     caller, with one such request a window, shut out every other.
//
// The counter's own "left" is what its reservation saw, less what this
// settlement adds; requests admitted since by other replicas are not in
// it, so a correction may overshoot by what they took: the counter then
// holds a debt that later requests wait for, as after any extra charge.
type ProviderState struct {
	RateLimited bool
	// RemainingTokens and RemainingRequests hold what the provider says
	// is left when HasTokens and HasRequests are set.
	RemainingTokens, RemainingRequests int64
	HasTokens, HasRequests             bool
}

// HasProviderLimits reports whether the reservation holds any provider
// limit: only then is a [ProviderState] worth reading.
func (r *Reservation) HasProviderLimits() bool {
	for i := range r.items {
		if r.items[i].limit.ProviderLimit() {
			return true
		}
	}
	return false
}

// SettleProvider settles as [Reservation.Settle] does, and in the same
// store call corrects the reservation's provider limits by ps. A store
// failure is the settlement's: the correction is retried with it in the
// background, and given up with it (logged, and counted in
// tokenwarden_settlements_total as lost).
func (r *Reservation) SettleProvider(ctx context.Context, usage Usage, ps ProviderState) (bool, error) {
	return r.settle(ctx, usage, &ps, false)
}

// providerExtra returns the extra charge ps asks of item it, which
// settles at actual.
func (l *Limiter) providerExtra(it *reservedItem, actual int64, ps *ProviderState) int64 {
	if !it.limit.ProviderLimit() {
		return 0
	}
	var said int64
	switch {
	case it.limit.Dimension == Tokens && ps.HasTokens:
		said = ps.RemainingTokens
	case it.limit.Dimension == Requests && ps.HasRequests:
		said = ps.RemainingRequests
	case ps.RateLimited:
		// A 429 that says nothing of this dimension: blocked. One that
		// does is corrected to its figure above, as any reply is: a
		// provider also answers 429 to one request too large for its
		// per-minute limit, however little is spent, and a block then
		// would let one caller shut every other out of the account.
		said = 0
	default:
		return 0
	}
	said = max(0, said)
	if ps.RateLimited && said == 0 {
		l.m.providerBlocked.WithLabelValues(it.limit.Name).Inc()
	}
	// What the counter will have left once this settlement replaces the
	// reserved amount with actual.
	left := it.remaining + it.amount - actual
	if left <= said {
		return 0
	}
	extra := left - said
	if !ps.RateLimited || said > 0 {
		l.m.providerCorrected.WithLabelValues(it.limit.Name).Add(float64(extra))
	}
	return extra
}
