package accounting

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// OnExhausted says what a request a limit refuses gets in place of the
// refusal. The zero value is the refusal.
//
// A limit may have both a wait and a fallback. The wait comes first: the
// client keeps the model it asked for when capacity returns in time.
// Only when the wait ends in a refusal (it timed out, the request could
// not wait, or the queue was full) is the request downgraded; a request
// whose client left while it waited is neither served nor downgraded.
// The fallback's reservation does not wait: the request has had its wait
// (see [Limiter.ReserveWaitingOrDowngrade]).
type OnExhausted struct {
	// WaitUpTo lets a request this limit refuses wait up to this long
	// for capacity instead of being refused at once (see wait.go);
	// zero means no wait.
	WaitUpTo time.Duration
	// DowngradeTo is a model to send the request to instead: the
	// request is reserved again as that model's (its limits and its
	// price), and if that fits, the caller rewrites the request to name
	// it. Only a limit matched to one model (Match["model"]) may name
	// one, and never its own family: a downgrade is from one model to
	// another. The fallback's own limits may name a further fallback; a
	// chain is at most MaxDowngrades long and has no cycle, which
	// [Options.Validate] checks.
	DowngradeTo string
}

// MaxDowngrades bounds a chain of downgrades: each step is a store round
// trip on the request's path.
const MaxDowngrades = 3

// MaxModelNameBytes bounds a model name a limit names as a fallback.
const MaxModelNameBytes = 256

// validateExhausted checks a limit's on_exhausted on its own.
func (l *Limit) validateExhausted() []error {
	to := l.OnExhausted.DowngradeTo
	if to == "" {
		return nil
	}
	const field = "on_exhausted.downgrade_to"
	from, ok := l.Match[AttributeModel]
	switch {
	case !validModelName(to):
		return []error{FieldErrorf(field, "%q must be 1-%d printable ASCII characters without spaces, quotes, '\\\\', '?', '#' or '%%'", to, MaxModelNameBytes)}
	case !ok:
		return []error{FieldErrorf(field, "needs match.model, the model the limit downgrades from: a limit on every model would refuse the fallback too")}
	case ModelFamily(to) == ModelFamily(from):
		return []error{FieldErrorf(field, "%q is of the family of match.model %q: a downgrade goes to another model", to, from)}
	}
	return nil
}

// validModelName reports whether a fallback model can be written into a
// JSON string, a request path and a header value as it is.
func validModelName(m string) bool {
	if m == "" || len(m) > MaxModelNameBytes {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"\?#%`, c) >= 0 {
			return false
		}
	}
	return true
}

// validateDowngrades checks the chains the limits' downgrades make: a
// fallback whose own limits downgrade it further must not lead back to a
// model on the way, nor on for more than MaxDowngrades steps. Each
// problem is named by the field of the first limit of its chain.
func validateDowngrades(limits []Limit) []error {
	// next: for each model family, the limits matched to it that
	// downgrade it, and where to.
	next := map[string][]int{}
	for i := range limits {
		l := &limits[i]
		if from, ok := l.Match[AttributeModel]; ok && l.OnExhausted.DowngradeTo != "" && l.validateExhausted() == nil {
			f := ModelFamily(from)
			next[f] = append(next[f], i)
		}
	}
	var errs []error
	for _, starts := range next {
		for _, i := range starts {
			if err := walkDowngrades(limits, next, i, []string{ModelFamily(limits[i].Match[AttributeModel])}); err != nil {
				errs = append(errs, FieldErrorf(fmt.Sprintf("limits[%d].on_exhausted.downgrade_to", i), "%s", err))
			}
		}
	}
	// Map order must not decide the order of the messages.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

// walkDowngrades follows limit i's downgrade from the families in path
// (the chain so far), and every downgrade of the fallback's own limits.
func walkDowngrades(limits []Limit, next map[string][]int, i int, path []string) error {
	to := ModelFamily(limits[i].OnExhausted.DowngradeTo)
	chain := append(slices.Clone(path), to)
	if slices.Contains(path, to) {
		return fmt.Errorf("%s is a cycle", strings.Join(chain, " -> "))
	}
	if len(chain)-1 > MaxDowngrades {
		return fmt.Errorf("%s is longer than %d downgrades", strings.Join(chain, " -> "), MaxDowngrades)
	}
	for _, j := range next[to] {
		if err := walkDowngrades(limits, next, j, chain); err != nil {
			return err
		}
	}
	return nil
}

// DowngradeTo returns the model a refused request may be sent to in
// place of the refusal, as the limit it tripped says, or "".
func (d *Decision) DowngradeTo() string {
	if d.Admitted || d.Trip.Limit == nil {
		return ""
	}
	return d.Trip.Limit.OnExhausted.DowngradeTo
}

// ReserveOrDowngrade reserves req as [Limiter.Reserve] does, and when a
// limit refuses it and names a fallback model (its OnExhausted), reserves
// the request again as that model's: req.Model set to the fallback, the
// model attribute to the fallback's family, the estimate and price factor
// as they were. A fallback that is refused in turn follows its own
// limit's fallback, to at most MaxDowngrades models in all, never one
// tried before. can reports whether the caller can send the request to a
// model (it can rewrite the request to name it); a fallback it cannot
// take ends the chain. It never waits: see
// [Limiter.ReserveWaitingOrDowngrade] for limits that also wait.
//
// It returns the reservation that decides the request, and, when that is
// an admission on a fallback, the original model's refusal (whose Trip
// names the limit that set off the downgrade); its Model is the model the
// request named. A refusal that no fallback turns into an admission is
// the original model's: the request the client sent, and the limit and
// the wait that are its to know; it alone is counted as a rejection. A
// refused reservation holds nothing, so nothing is released on the way.
//
// When the store fails on a fallback's reservation, the fallback's limits
// decide as they do for any request: an error if one of them fails
// closed, else an admission (FailedOpen) on the fallback.
func (l *Limiter) ReserveOrDowngrade(ctx context.Context, req Request, can func(model string) bool) (res, refused *Reservation, err error) {
	first, err := l.reserve(ctx, req)
	if err != nil || first.Admitted {
		return first, nil, err
	}
	return l.downgrade(ctx, req, first, can)
}

// ReserveWaitingOrDowngrade is [Limiter.ReserveOrDowngrade] for limits
// that may also wait: the request is first reserved as
// [Limiter.ReserveWaiting] reserves it (hold is its hold), and only a
// refusal that wait ends in is downgraded. A request whose caller went
// away while it waited (Wait.Outcome WaitCancelled) is returned refused,
// not downgraded and not counted: there is no one to answer. The
// fallbacks are reserved without waiting, whatever their limits say: the
// request has waited its time already, and a second wait would hold the
// client beyond the one its proxy's message timeout was extended for.
//
// A downgraded request's admission on the fallback carries the wait it
// had on the model it named (Wait.Outcome WaitTimedOut or WaitQueueFull,
// counted as such in tokenwarden_waited_total), as its refusal does: how
// long the client was held is the request's, whichever model answers.
func (l *Limiter) ReserveWaitingOrDowngrade(ctx context.Context, req Request, hold func(upTo time.Duration) error, can func(model string) bool) (res, refused *Reservation, err error) {
	first, err := l.reserveWaiting(ctx, req, hold)
	if err != nil || first.Admitted {
		return first, nil, err
	}
	if first.Wait.Outcome == WaitCancelled {
		return first, nil, nil
	}
	res, refused, err = l.downgrade(ctx, req, first, can)
	if refused != nil {
		res.Wait = first.Wait
	}
	return res, refused, err
}

// downgrade follows the fallbacks of first, req's refusal (see
// ReserveOrDowngrade), and counts first as a rejection when none admits
// the request.
func (l *Limiter) downgrade(ctx context.Context, req Request, first *Reservation, can func(model string) bool) (res, refused *Reservation, err error) {
	tried := []string{ModelFamily(req.Model)}
	cur := first
	for range MaxDowngrades {
		to := cur.DowngradeTo()
		if to == "" || slices.Contains(tried, ModelFamily(to)) || !can(to) {
			break
		}
		tried = append(tried, ModelFamily(to))
		fb := req
		fb.Model = to
		fb.Attributes = withModel(req.Attributes, ModelFamily(to))
		next, err := l.reserve(ctx, fb)
		if err != nil {
			return nil, nil, err
		}
		if next.Admitted {
			l.m.downgrades.WithLabelValues(first.Trip.Limit.Name).Inc()
			return next, first, nil
		}
		cur = next
	}
	l.countRefusal(first)
	return first, nil, nil
}

// withModel returns a copy of attrs with the model attribute set to
// family.
func withModel(attrs Attributes, family string) Attributes {
	out := make(Attributes, 0, len(attrs)+1)
	for _, a := range attrs {
		if a.Name != AttributeModel {
			out = append(out, a)
		}
	}
	return append(out, Attribute{Name: AttributeModel, Value: family})
}

// Downgrades reports whether any of the Limiter's limits names a
// fallback model: a caller with nothing to downgrade skips the work of
// preparing for one.
func (l *Limiter) Downgrades() bool {
	for i := range l.limits {
		if l.limits[i].OnExhausted.DowngradeTo != "" {
			return true
		}
	}
	return false
}
