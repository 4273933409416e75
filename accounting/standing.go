package accounting

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// The read side's own errors. Each is returned wrapped, with the names
// that explain it.
var (
	// ErrUnknownLimit: no limit has the name asked for.
	ErrUnknownLimit = errors.New("accounting: no such limit")
	// ErrScopeMissing: a counter was named without a value for every
	// attribute of its limit's scope.
	ErrScopeMissing = errors.New("accounting: scope values missing")
)

// Bounds of [Limiter.Top].
const (
	// MaxTopN is the most counters Top returns.
	MaxTopN = 100
	// DefaultTopScan is how many store entries Top examines when asked
	// for no other bound.
	DefaultTopScan = 10_000
	// MaxTopScan is the most store entries Top examines. On Redis that
	// is some hundred round trips, each a few milliseconds of Redis's
	// time at most: an operator's question must not stall the store
	// every replica's requests wait on.
	MaxTopScan = 100_000
)

// LimitUsage is one limit's counter for one scope tuple, as it stands.
type LimitUsage struct {
	Limit *Limit
	// Scope holds the counter's scope values, in the order of
	// Limit.Scope.
	Scope Attributes
	CounterUsage
}

// TopUsage is [Limiter.Top]'s answer.
type TopUsage struct {
	Limit *Limit
	// Counters are the heaviest counters found, most used first.
	Counters []LimitUsage
	// Scanned is how many of the limit's counters were read; Complete
	// reports that the whole store was scanned (see [TopResult]).
	Scanned  int
	Complete bool
}

// inspector returns the store's read side.
func (l *Limiter) inspector() (Inspector, error) {
	in, ok := l.store.(Inspector)
	if !ok {
		return nil, ErrNotInspectable
	}
	return in, nil
}

// Limit returns the limit called name, as the Limiter applies it.
func (l *Limiter) Limit(name string) (*Limit, bool) {
	for i := range l.limits {
		if l.limits[i].Name == name {
			return &l.limits[i], true
		}
	}
	return nil, false
}

// Usage returns, for every limit that applies to a request with attrs
// (the ones [Limiter.Reserve] would charge), its counter's state now, in
// the order of the limits. A model attribute is read by family, as the
// requests' is. It charges nothing.
func (l *Limiter) Usage(ctx context.Context, attrs Attributes) ([]LimitUsage, error) {
	in, err := l.inspector()
	if err != nil {
		return nil, err
	}
	attrs = byFamilyAttrs(attrs)
	var out []LimitUsage
	var counters []Counter
	for i := range l.limits {
		lim := &l.limits[i]
		if !lim.Applies(attrs) {
			continue
		}
		lim = atValue(lim, attrs)
		out = append(out, LimitUsage{Limit: lim, Scope: scopeOf(lim, attrs)})
		counters = append(counters, lim.Counter(attrs))
	}
	if len(counters) == 0 {
		return out, nil
	}
	states, err := in.Peek(ctx, counters)
	if err != nil {
		return nil, err
	}
	if len(states) != len(counters) {
		return nil, fmt.Errorf("%w: store answered %d states for %d counters", ErrStoreUnavailable, len(states), len(counters))
	}
	for i := range out {
		out[i].CounterUsage = states[i]
	}
	return out, nil
}

// CounterUsage returns the state of limit name's counter for the scope
// values in attrs (other attributes are ignored, but for the one a
// limit_from reads its value from). The limit's Match is not consulted:
// this names a counter, not a request.
func (l *Limiter) CounterUsage(ctx context.Context, name string, attrs Attributes) (LimitUsage, error) {
	in, err := l.inspector()
	if err != nil {
		return LimitUsage{}, err
	}
	lim, attrs, err := l.counterOf(name, attrs)
	if err != nil {
		return LimitUsage{}, err
	}
	lim = atValue(lim, attrs)
	states, err := in.Peek(ctx, []Counter{lim.Counter(attrs)})
	if err != nil {
		return LimitUsage{}, err
	}
	if len(states) != 1 {
		return LimitUsage{}, fmt.Errorf("%w: store answered %d states for 1 counter", ErrStoreUnavailable, len(states))
	}
	return LimitUsage{Limit: lim, Scope: scopeOf(lim, attrs), CounterUsage: states[0]}, nil
}

// ResetCounter starts limit name's counter for the scope values in attrs
// afresh: full, as if nothing had been charged. It returns the counter's
// state just before (read in a call of its own: a charge landing between
// the two is reset too) and whether the store held any.
func (l *Limiter) ResetCounter(ctx context.Context, name string, attrs Attributes) (LimitUsage, bool, error) {
	before, err := l.CounterUsage(ctx, name, attrs)
	if err != nil {
		return LimitUsage{}, false, err
	}
	in, _ := l.inspector()
	existed, err := in.ResetCounter(ctx, before.Limit.Counter(before.Scope))
	if err != nil {
		return LimitUsage{}, false, err
	}
	return before, existed, nil
}

// Top returns the (at most n, at most [MaxTopN]) counters of limit name
// that hold the most usage now, examining at most maxScan store entries
// (zero means [DefaultTopScan]; at most [MaxTopScan]). A limit with a
// [LimitFrom] is read at its own value, the value of a request without
// the attribute: the store keeps no value with a counter. Counters the
// limit wrote under another scope, before its config changed, share its
// key prefix but not its key layout: they are skipped.
func (l *Limiter) Top(ctx context.Context, name string, n, maxScan int) (TopUsage, error) {
	in, err := l.inspector()
	if err != nil {
		return TopUsage{}, err
	}
	lim, ok := l.Limit(name)
	if !ok {
		return TopUsage{}, fmt.Errorf("%w %q", ErrUnknownLimit, name)
	}
	n = min(max(n, 1), MaxTopN)
	if maxScan <= 0 {
		maxScan = DefaultTopScan
	}
	maxScan = min(maxScan, MaxTopScan)
	res, err := in.Top(ctx, TopRequest{Prefix: CounterPrefix(lim), Counter: lim.Counter(nil), N: n, MaxScan: maxScan})
	if err != nil {
		return TopUsage{}, err
	}
	out := TopUsage{Limit: lim, Scanned: res.Scanned, Complete: res.Complete}
	for _, c := range res.Counters {
		scope, ok := ScopeValues(lim, c.Key)
		if !ok || len(out.Counters) == n {
			continue
		}
		out.Counters = append(out.Counters, LimitUsage{Limit: lim, Scope: scope, CounterUsage: c.CounterUsage})
	}
	return out, nil
}

// counterOf finds limit name and checks that attrs name every attribute
// of its scope, returning attrs with the model by family.
func (l *Limiter) counterOf(name string, attrs Attributes) (*Limit, Attributes, error) {
	lim, ok := l.Limit(name)
	if !ok {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownLimit, name)
	}
	attrs = byFamilyAttrs(attrs)
	var missing []string
	for _, s := range lim.Scope {
		if _, ok := attrs.Get(s); !ok {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("%w: limit %q is per %s; give %s", ErrScopeMissing, name, strings.Join(lim.Scope, "+"), strings.Join(missing, ", "))
	}
	return lim, attrs, nil
}

// atValue returns lim as a request with attrs is held to it: at the
// value its [LimitFrom] gives, if any (see [Limit.ValueFor]). Unlike a
// reservation, a read counts and logs no value.
func atValue(lim *Limit, attrs Attributes) *Limit {
	if lim.From == nil {
		return lim
	}
	v, _ := lim.ValueFor(attrs)
	if v == lim.Limit {
		return lim
	}
	c := *lim
	c.Limit = v
	return &c
}

// scopeOf returns lim's scope values from attrs, which has them all.
func scopeOf(lim *Limit, attrs Attributes) Attributes {
	out := make(Attributes, 0, len(lim.Scope))
	for _, name := range lim.Scope {
		v, _ := attrs.Get(name)
		out = append(out, Attribute{Name: name, Value: v})
	}
	return out
}

// byFamilyAttrs returns attrs with a model attribute replaced by its
// family, as requests carry it; attrs itself is left as it is.
func byFamilyAttrs(attrs Attributes) Attributes {
	for i, a := range attrs {
		if a.Name == AttributeModel && ModelFamily(a.Value) != a.Value {
			out := append(Attributes(nil), attrs...)
			out[i].Value = ModelFamily(a.Value)
			return out
		}
	}
	return attrs
}
