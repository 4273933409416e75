package accounting

import (
	"errors"
	"math"
	"math/bits"
)

// ReserveFor keeps a share of a limit's capacity for a privileged tier
// of requests: those whose Attribute equals Value. Interactive traffic
// can so keep 30% of a shared tokens-per-minute that batch traffic
// cannot take, however much batch there is.
//
// Both tiers count on the same counter. A privileged request is checked
// against the whole limit; any other (including one without the
// attribute) against the limit less the reserved share, the share
// rounded up to a whole unit so that the privileged tier keeps at least
// what was asked. What the counter holds — both tiers' usage — is what
// each check compares with, so other requests are admitted only while
// the counter stays below limit × (1 − Share), and the privileged tier
// always finds the rest: with a limit of 1000 and a share of 0.3,
// other requests never push the counter past 700, and privileged ones
// take what is left up to 1000, at least 300 of it. Privileged usage
// counts against the others too: a window in which interactive traffic
// used 500 leaves batch at most 200. The reserve is not a quota of the
// privileged tier: it may take the whole limit.
//
// The store takes each request's capacity with the request (as for
// [LimitFrom], whose value the share applies to when both are set), so
// the reserve needs nothing of it. That works for the algorithms whose
// state is what was used — sliding and fixed windows, lifetime budgets,
// concurrent limits (a concurrent limit of 10 with a share of 0.3 keeps
// 3 slots for the privileged tier) — and not for a token bucket, whose
// state is the tokens left, clamped to the capacity of whichever request
// refills it: a smaller capacity for one tier would throw away the
// privileged tier's tokens. A token bucket cannot have a reserve.
//
// As with any limit, a settlement that charges more than the estimate
// may take the counter past the other requests' share (the extra charge
// is a debt that later requests wait for); the reserve bounds what is
// admitted, not what admitted requests turn out to cost.
type ReserveFor struct {
	// Attribute names the identity attribute that marks the privileged
	// tier, and Value the value it must have.
	Attribute string
	Value     string
	// Share is the part of the limit kept for the privileged tier, in
	// (0, 1).
	Share float64
}

// sharePPM is the share in millionths, the precision of its arithmetic:
// a float share times a limit could round a reserve of exactly 300
// up to 301 (0.3 is not exact in binary).
func (r *ReserveFor) sharePPM() uint64 {
	return uint64(math.Round(r.Share * 1e6))
}

// Reserved returns how much of value the privileged tier keeps: value ×
// Share in millionths, rounded up.
func (r *ReserveFor) Reserved(value int64) int64 {
	if value <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(value), r.sharePPM())
	if hi >= 1e6 {
		// Beyond any limit a config can state (1e15 × 1e6 < 1e6 × 2⁶⁴).
		return value
	}
	q, rem := bits.Div64(hi, lo, 1e6)
	if rem > 0 {
		q++
	}
	return int64(min(q, uint64(value)))
}

// Privileged reports whether a request with attrs belongs to the tier
// the share is kept for.
func (r *ReserveFor) Privileged(attrs Attributes) bool {
	v, ok := attrs.Get(r.Attribute)
	return ok && v == r.Value
}

// validateReserveFor reports the problems of l.ReserveFor, each a
// [FieldError] named under reserve_for.
func (l *Limit) validateReserveFor() error {
	r := l.ReserveFor
	if r == nil {
		return nil
	}
	var errs []error
	if r.Attribute == "" {
		errs = append(errs, FieldErrorf("reserve_for.attribute", "required"))
	}
	if r.Value == "" {
		errs = append(errs, FieldErrorf("reserve_for.value", "required"))
	}
	ppm := r.sharePPM()
	switch {
	case math.IsNaN(r.Share) || r.Share <= 0 || r.Share >= 1 || ppm == 0 || ppm >= 1e6:
		errs = append(errs, FieldErrorf("reserve_for.share", "%v is not in (0, 1)", r.Share))
	case l.Limit > 0 && l.Limit-r.Reserved(l.Limit) < 1:
		errs = append(errs, FieldErrorf("reserve_for.share", "%v of %d leaves nothing for other requests", r.Share, l.Limit))
	}
	if l.Algorithm == TokenBucket {
		errs = append(errs, FieldErrorf("reserve_for", "a token_bucket cannot keep a share: its state is the tokens left, which a smaller capacity for one tier would cut for both"))
	}
	return errors.Join(errs...)
}

// forTier returns lim as it applies to a request with attrs, and the
// amount of its capacity withheld from the request: lim itself and 0
// for a privileged request (or a limit without a reserve), else a copy
// holding the limit less the reserved share.
func forTier(lim *Limit, attrs Attributes) (*Limit, int64) {
	r := lim.ReserveFor
	if r == nil || r.Privileged(attrs) {
		return lim, 0
	}
	held := r.Reserved(lim.Limit)
	c := *lim
	c.Limit -= held
	return &c, held
}

// heldBack reports whether only a reserve caused a refusal: the limit
// named in it kept a share from the request, and the whole limit had
// room.
func heldBack(items []reservedItem, trip Trip) bool {
	for i := range items {
		it := &items[i]
		if it.limit != trip.Limit || it.held == 0 {
			continue
		}
		return trip.Requested <= trip.Remaining+it.held
	}
	return false
}

// countRefusal counts a refusal that reaches the caller: by the limit it
// names, and as held back when only a reserve caused it. A request that
// waits for capacity is refused by each attempt but the last, and is
// counted once, by the outcome of its wait.
func (l *Limiter) countRefusal(r *Reservation) {
	l.m.rejectedBy.WithLabelValues(r.Trip.Limit.Name).Inc()
	if r.heldBack {
		l.m.heldForTier.WithLabelValues(r.Trip.Limit.Name).Inc()
	}
}
