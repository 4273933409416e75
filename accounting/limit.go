package accounting

import (
	"errors"
	"fmt"
	"time"
)

// Limit caps one dimension over a window for each distinct tuple of its
// scope attributes.
type Limit struct {
	// Name identifies the limit in replies, metrics and store keys.
	Name      string
	Dimension Dimension
	// Scope lists the attributes whose values key the counter. Empty means
	// one global counter. A request lacking one of them is not subject to
	// the limit (it never shares an "empty" bucket).
	Scope []string
	// Match restricts the limit to requests whose attributes equal these
	// values (a missing attribute does not match).
	Match     map[string]string
	Algorithm Algorithm
	// Limit is the capacity per window, in the dimension's unit (cost:
	// micro-dollars). For a token bucket it is the refill per Window.
	Limit int64
	// Burst is a token bucket's capacity; zero means Limit.
	Burst    int64
	Window   time.Duration
	Calendar Calendar
	// Location is the time zone of a calendar window's days and months;
	// nil means UTC.
	Location *time.Location
	// OnStoreError decides admission when the store cannot be reached.
	OnStoreError FailMode
	// Mode is Enforce (the zero value) or Shadow: counted, never
	// enforced (see [Mode]).
	Mode Mode
	// From takes the limit's value per request from an identity
	// attribute, bounded by a ceiling, Limit being the value when the
	// attribute has none; nil means Limit for every request.
	From *LimitFrom
	// ReserveFor keeps a share of the limit for a privileged tier of
	// requests (see priority.go); nil keeps none.
	ReserveFor *ReserveFor
	// AcrossRegions makes the limit one budget for all the regions that
	// share a ledger, each spending from its own store what it leased
	// (see [Regional]). Only an unscoped fixed or calendar window may be.
	AcrossRegions bool
	// OnExhausted is what a request the limit refuses gets instead of
	// the refusal at once: a wait for capacity, a fallback model, or
	// both (see exhausted.go); the zero value is the refusal.
	OnExhausted OnExhausted
}

// policyWindow is the window a header stating the limit's policy names:
// the window, or a token bucket's refill period; a calendar month as 31
// days, its longest.
func (l *Limit) policyWindow() time.Duration {
	switch l.Calendar {
	case CalendarMonth:
		return 31 * 24 * time.Hour
	case CalendarDay:
		return 24 * time.Hour
	}
	return l.Window
}

// Capacity is the most a single request can ever reserve on the limit.
func (l *Limit) Capacity() int64 {
	if l.Algorithm == TokenBucket && l.Burst > 0 {
		return l.Burst
	}
	return l.Limit
}

// Validate reports every problem that keeps a store from enforcing the
// limit, or that makes it mean something other than it says, joined;
// each is a [FieldError] named by the limit's config key (name, window,
// burst, …).
func (l *Limit) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, FieldErrorf(field, format, args...))
	}
	switch {
	case l.Name == "":
		bad("name", "required")
	case !validLimitName(l.Name):
		// The name is a store key's prefix, a metric label and a reply
		// header's value: keep it to characters that are safe in all.
		bad("name", "%q must be 1-%d letters, digits, '_', '.' or '-', starting with a letter or digit", l.Name, MaxLimitNameBytes)
	}
	if l.Dimension >= numDimensions {
		bad("dimension", "unknown dimension %d", l.Dimension)
	}
	listed := make(map[string]bool, len(l.Scope))
	for i, name := range l.Scope {
		if listed[name] {
			bad(fmt.Sprintf("scope[%d]", i), "%q is listed twice", name)
		}
		listed[name] = true
	}
	if l.Algorithm > Lifetime {
		bad("algorithm", "unknown algorithm %d", l.Algorithm)
	}
	errs = append(errs, l.validateReserveFor())
	// Checked before the algorithms that validate their own fields: a
	// shadow limit and a time zone mean the same for every algorithm.
	if l.Mode > Shadow {
		bad("mode", "unknown mode %d", l.Mode)
	}
	if l.Location != nil && l.Calendar == NoCalendar {
		// Concurrent limits and lifetime budgets have no calendar either.
		bad("time_zone", "only a calendar window (day or month) has a time zone")
	}
	errs = append(errs, l.validateWait()...)
	errs = append(errs, l.validateExhausted()...)
	errs = append(errs, l.validateAcross()...)
	errs = append(errs, l.validateProvider())
	if l.Dimension == Concurrent || l.Algorithm == Leases {
		// A concurrent limit's window is its lease: checked there.
		errs = append(errs, l.validateConcurrent()...)
		return errors.Join(errs...)
	}
	if l.Algorithm == Lifetime {
		// Its window is the run's wall-clock cap: checked there.
		errs = append(errs, l.validateLifetime()...)
		return errors.Join(errs...)
	}
	if l.Limit <= 0 {
		bad("limit", "must be positive")
	}
	switch {
	case l.Burst < 0:
		bad("burst", "must not be negative")
	case l.Burst > 0 && l.Algorithm != TokenBucket:
		bad("burst", "only a token_bucket has a burst")
	}
	switch l.Calendar {
	case NoCalendar:
		if l.Window < MinWindow || l.Window > MaxWindow {
			bad("window", "%s is outside 1s..31d", l.Window)
		}
	case CalendarMonth:
		if l.Algorithm != FixedWindow {
			bad("window", "a calendar month needs algorithm fixed_window")
		}
	case CalendarDay:
		if l.Algorithm != FixedWindow {
			bad("window", "a calendar day needs algorithm fixed_window")
		}
	default:
		bad("window", "unknown calendar %d", l.Calendar)
	}
	if l.OnStoreError > FailOpen {
		bad("on_store_error", "unknown fail mode %d", l.OnStoreError)
	}
	errs = append(errs, l.validateFrom())
	return errors.Join(errs...)
}

// The bounds of a window that does not follow the calendar. Below a
// second the store's clock and the network blur the window; above a
// month a limit is a budget, which a calendar month expresses.
const (
	MinWindow = time.Second
	MaxWindow = 31 * 24 * time.Hour
)

// MaxLimitNameBytes is the longest limit name.
const MaxLimitNameBytes = 64

// validLimitName reports whether name is 1-MaxLimitNameBytes of
// [A-Za-z0-9_.-], starting with a letter or digit.
func validLimitName(name string) bool {
	if name == "" || len(name) > MaxLimitNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Attribute is one identity attribute of a request.
type Attribute struct {
	Name  string
	Value string
}

// Attributes are a request's identity attributes. Names are unique; a
// missing attribute is absent rather than empty.
type Attributes []Attribute

// Get returns the value of the named attribute and whether it is present.
func (a Attributes) Get(name string) (string, bool) {
	for i := range a {
		if a[i].Name == name {
			return a[i].Value, true
		}
	}
	return "", false
}

// Applies reports whether the limit applies to a request with these
// attributes: every Match entry equals and every Scope attribute is present.
func (l *Limit) Applies(attrs Attributes) bool {
	// Most limits match nothing: starting a map iteration costs more
	// than the rest of the check.
	if len(l.Match) > 0 {
		for name, want := range l.Match {
			if got, ok := attrs.Get(name); !ok || got != want {
				return false
			}
		}
	}
	for _, name := range l.Scope {
		if _, ok := attrs.Get(name); !ok {
			return false
		}
	}
	return true
}

// Counter returns the counter the limit uses for a request with attrs,
// which must satisfy [Limit.Applies].
func (l *Limit) Counter(attrs Attributes) Counter {
	return l.counter(CounterKey(l, attrs))
}

// counter returns the limit's counter under key.
func (l *Limit) counter(key string) Counter {
	return Counter{
		Key:       key,
		Algorithm: l.Algorithm,
		Limit:     l.Limit,
		Burst:     l.Burst,
		Window:    l.Window,
		Calendar:  l.Calendar,
		Location:  l.Location,
	}
}
