package accounting

import (
	"context"
	"slices"
	"strings"
	"time"
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
// same store call, and only ever charges: the provider's figures cover
// traffic tokenwarden does not see, and a provider that counts
// differently must not hand out budget.
//
//   - RemainingTokens, RemainingRequests (x-ratelimit-remaining-*,
//     anthropic-ratelimit-{tokens,requests}-remaining): what the provider
//     says is left is the most the counter may show. A tokens or requests
//     limit is charged, where it was reserved, what it thinks is left
//     beyond the figure, on any reply, a 429 included: a provider answers
//     429 to a single request too large for its per-minute limit whatever
//     the account has spent ("Request too large … Limit 30000, Requested
//     50000"), and the figure then says the account is not exhausted.
//   - RateLimited (the provider refused the request with a 429): a
//     provider limit the reply states nothing left for (no figure for
//     its dimension, or 0) is blocked for every replica sharing the
//     store, for at most the provider's RetryAfter, and at most
//     [MaxProviderBlock] (which is also the block when the 429 states no
//     retry-after). The block is a charge of what the counter has left,
//     booked so that it is gone within that time (see providerBlock);
//     where the counter's algorithm cannot book one that goes so soon,
//     nothing is blocked and the requests meet the provider's own 429s.
//     A block never outlasts the provider's word: one caller that
//     provokes a 429 (a request the estimate cannot see the size of)
//     keeps the others out of the account no longer than the provider
//     itself does.
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
	// RetryAfter is the 429's retry-after when HasRetryAfter is set.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// MaxProviderBlock is the longest a provider's 429 blocks a provider
// limit, and the block of a 429 that states no retry-after (Gemini's and
// Bedrock's, whose per-minute quotas free within it).
const MaxProviderBlock = time.Minute

// block is how long the 429 of ps blocks the limits it states nothing
// left for: its retry-after, up to MaxProviderBlock.
func (ps *ProviderState) block() time.Duration {
	if !ps.HasRetryAfter {
		return MaxProviderBlock
	}
	return min(max(ps.RetryAfter, 0), MaxProviderBlock)
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
// tokenwarden_settlements_total as lost); a block is not retried, as it
// would land late.
func (r *Reservation) SettleProvider(ctx context.Context, usage Usage, ps ProviderState) (bool, error) {
	return r.settleProvider(ctx, usage, ps, r.l.now())
}

// settleProvider is SettleProvider at now on the Limiter's clock.
func (r *Reservation) settleProvider(ctx context.Context, usage Usage, ps ProviderState, now time.Time) (bool, error) {
	return r.settle(ctx, usage, &providerFeedback{ProviderState: ps, elapsed: now.Sub(r.at)}, false)
}

// providerFeedback is a ProviderState with the time from the
// reservation's answer to its settlement.
type providerFeedback struct {
	ProviderState
	elapsed time.Duration
}

// providerCharge returns what pf asks of item it, which settles at
// actual: an extra charge booked with the settlement, and a block to
// book beside it (Actual 0 when none).
func (l *Limiter) providerCharge(it *reservedItem, actual int64, pf *providerFeedback) (int64, SettleItem) {
	if !it.limit.ProviderLimit() {
		return 0, SettleItem{}
	}
	// What the counter will have left once this settlement replaces the
	// reserved amount with actual.
	left := it.remaining + it.amount - actual
	said, stated := pf.remaining(it.limit.Dimension)
	if pf.RateLimited && said == 0 {
		// A 429 that leaves the limit nothing: blocked for a while. One
		// that states more is corrected to its figure below, as any
		// reply is.
		amount, mark := providerBlock(it, left, pf.block(), pf.elapsed)
		if amount <= 0 {
			return 0, SettleItem{}
		}
		l.m.providerBlocked.WithLabelValues(it.limit.Name).Inc()
		return 0, SettleItem{Counter: it.counter, Actual: amount, Mark: mark, Epoch: it.epoch}
	}
	if !stated || left <= said {
		return 0, SettleItem{}
	}
	extra := left - said
	l.m.providerCorrected.WithLabelValues(it.limit.Name).Add(float64(extra))
	return extra, SettleItem{}
}

// remaining returns the figure ps states for dimension d, never below
// zero, and whether it states one.
func (ps *ProviderState) remaining(d Dimension) (int64, bool) {
	switch {
	case d == Tokens && ps.HasTokens:
		return max(0, ps.RemainingTokens), true
	case d == Requests && ps.HasRequests:
		return max(0, ps.RemainingRequests), true
	}
	return 0, false
}
