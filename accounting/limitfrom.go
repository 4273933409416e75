package accounting

import (
	"errors"
	"log/slog"
	"math"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// LimitFrom takes a limit's value from an identity attribute of each
// request, so that one limit holds every tenant to the figure its
// contract names (a "tpm" claim of a verified JWT, a value a proxy
// writes into Envoy's metadata) instead of one figure for all of them.
//
// The limit's own [Limit.Limit] is the value when the attribute is
// absent or unusable, and Ceiling bounds what the attribute may ask
// for, so that no value, however it got there, unlimits a caller:
//
//   - absent (the request has no such attribute): Limit.
//   - a whole number for requests and tokens, a decimal amount of USD
//     for cost (kept to the micro-dollar), above zero and at most
//     Ceiling: that value.
//   - above Ceiling, however far (a number too large for any integer
//     included): Ceiling.
//   - anything else — not a plain decimal number ("1e5", "+5", " 5",
//     "0x10"), negative, zero (or, for cost, under half a micro-dollar),
//     fractional for requests or tokens: Limit, counted and logged at
//     warn. Zero is not "blocked": a value that blocks a tenant is
//     better stated by a limit matched to it.
//
// The value is not part of the counter's key: a scope tuple has one
// counter whatever value its requests carry, and each request is
// checked against its own value (the store takes the request's value as
// the capacity for that one check). A value that changes mid-window
// therefore applies at once, to what the window already holds: a tenant
// whose tokens-per-minute rises from 1000 to 5000 with 800 used has
// 4200 left, not a fresh 5000, and one lowered below what it has used
// is refused until the window frees enough. A value that varied within
// one scope tuple could not buy more than the largest value it carried,
// up to Ceiling; scope the limit by the attribute the value belongs to
// (scope [tenant] for a tenant's contract) so that it does not vary.
//
// A token bucket takes the value as its refill per window and as its
// capacity: Burst must be zero.
type LimitFrom struct {
	// Attribute names the identity attribute that holds the value.
	Attribute string
	// Ceiling is the largest value, in the dimension's unit (cost:
	// micro-dollars).
	Ceiling int64
}

// LimitValueSource says where a request's value of a limit with a
// [LimitFrom] came from. Its String is the source label of
// tokenwarden_limit_values_total.
type LimitValueSource uint8

const (
	// ValueFromAttribute: the attribute's value, as it was.
	ValueFromAttribute LimitValueSource = iota
	// ValueAbsent: no attribute; the limit's own value.
	ValueAbsent
	// ValueInvalid: the attribute held no usable value; the limit's
	// own value.
	ValueInvalid
	// ValueCeiling: the attribute asked for more than the ceiling; the
	// ceiling.
	ValueCeiling

	numValueSources
)

// String returns the source's metric label.
func (s LimitValueSource) String() string {
	switch s {
	case ValueFromAttribute:
		return "attribute"
	case ValueAbsent:
		return "absent"
	case ValueInvalid:
		return "invalid"
	case ValueCeiling:
		return "ceiling"
	}
	return "source(" + strconv.Itoa(int(s)) + ")"
}

// ValueFor returns the limit's value for a request with attrs, and
// where it came from: l.Limit without a [LimitFrom], else as LimitFrom
// describes.
func (l *Limit) ValueFor(attrs Attributes) (int64, LimitValueSource) {
	if l.From == nil {
		return l.Limit, ValueFromAttribute
	}
	s, ok := attrs.Get(l.From.Attribute)
	if !ok {
		return l.Limit, ValueAbsent
	}
	v, src := parseLimitValue(l.Dimension, s, l.From.Ceiling)
	if src == ValueInvalid {
		return l.Limit, ValueInvalid
	}
	return v, src
}

// parseLimitValue reads s as an amount of dimension d: digits for
// requests and tokens, digits with an optional fraction for cost (USD,
// rounded to the micro-dollar). Only the source is meaningful when it
// is ValueInvalid.
func parseLimitValue(d Dimension, s string, ceiling int64) (int64, LimitValueSource) {
	point := -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
		case c == '.' && point < 0 && d == Cost:
			point = i
		default:
			return 0, ValueInvalid
		}
	}
	if s == "" || point == 0 || point == len(s)-1 {
		return 0, ValueInvalid
	}
	var v int64
	if d == Cost {
		// The grammar above leaves ParseFloat only plain decimals; one
		// too large for a float64 is +Inf, which is above any ceiling.
		f, _ := strconv.ParseFloat(s, 64)
		micros := math.Round(f * 1e6)
		if micros > float64(ceiling) {
			return ceiling, ValueCeiling
		}
		v = int64(micros)
	} else {
		n, err := strconv.ParseInt(s, 10, 64)
		if errors.Is(err, strconv.ErrRange) || n > ceiling {
			return ceiling, ValueCeiling
		}
		v = n
	}
	if v <= 0 {
		return 0, ValueInvalid
	}
	return v, ValueFromAttribute
}

// validateFrom reports the problems of l.From, each a [FieldError] named
// under limit_from (or naming burst or limit, which it constrains).
func (l *Limit) validateFrom() error {
	f := l.From
	if f == nil {
		return nil
	}
	var errs []error
	if f.Attribute == "" {
		errs = append(errs, FieldErrorf("limit_from.attribute", "required"))
	}
	switch {
	case f.Ceiling <= 0:
		errs = append(errs, FieldErrorf("limit_from.ceiling", "must be positive"))
	case l.Limit > f.Ceiling:
		errs = append(errs, FieldErrorf("limit", "%d is above limit_from.ceiling %d: the value for requests without the attribute must be one the attribute could give", l.Limit, f.Ceiling))
	}
	if l.Burst != 0 {
		errs = append(errs, FieldErrorf("burst", "a limit with limit_from takes its capacity from the attribute; burst must be unset"))
	}
	return errors.Join(errs...)
}

// limitValues counts, per limit with a [LimitFrom], where its requests'
// values came from, and logs the unusable ones.
type limitValues struct {
	counts *prometheus.CounterVec // limit, source
	// byLimit holds the children of counts for each limit with a
	// LimitFrom, found once rather than on every request.
	byLimit map[string]*[numValueSources]prometheus.Counter
	log     *slog.Logger
}

// newLimitValues returns the counts of limits' value sources, in counts,
// and logs to log.
func newLimitValues(counts *prometheus.CounterVec, log *slog.Logger, limits []Limit) *limitValues {
	v := &limitValues{counts: counts, log: log, byLimit: make(map[string]*[numValueSources]prometheus.Counter)}
	for i := range limits {
		if limits[i].From == nil {
			continue
		}
		c := new([numValueSources]prometheus.Counter)
		for s := range c {
			c[s] = counts.WithLabelValues(limits[i].Name, LimitValueSource(s).String())
		}
		v.byLimit[limits[i].Name] = c
	}
	return v
}

// maxLoggedValue bounds how much of an unusable value a log line quotes.
const maxLoggedValue = 64

// forRequest returns lim as it applies to a request with attrs: lim
// itself when its value is its own, else a copy holding the request's
// value, so that the counter, the rejection's figures and the rate-limit
// headers all state the limit this request was held to.
func (v *limitValues) forRequest(lim *Limit, attrs Attributes) *Limit {
	value, src := lim.ValueFor(attrs)
	if c := v.byLimit[lim.Name]; c != nil {
		c[src].Inc()
	}
	if src == ValueInvalid {
		s, _ := attrs.Get(lim.From.Attribute)
		if len(s) > maxLoggedValue {
			s = s[:maxLoggedValue] + "…"
		}
		v.log.Warn("limit value attribute is not a usable amount; the limit's own value applies",
			"limit", lim.Name, "attribute", lim.From.Attribute, "value", s, "dimension", lim.Dimension.String(), "value_used", lim.Limit)
	}
	if value == lim.Limit {
		return lim
	}
	c := *lim
	c.Limit = value
	return &c
}
