package accounting

import (
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
	// OnStoreError decides admission when the store cannot be reached.
	OnStoreError FailMode
}

// Capacity is the most a single request can ever reserve on the limit.
func (l *Limit) Capacity() int64 {
	if l.Algorithm == TokenBucket && l.Burst > 0 {
		return l.Burst
	}
	return l.Limit
}

// Validate reports an error for a limit no store could enforce.
func (l *Limit) Validate() error {
	switch {
	case l.Name == "":
		return fmt.Errorf("limit has no name")
	case l.Dimension >= numDimensions:
		return fmt.Errorf("limit %q: unknown dimension", l.Name)
	case l.Limit <= 0:
		return fmt.Errorf("limit %q: limit must be positive", l.Name)
	case l.Burst < 0:
		return fmt.Errorf("limit %q: burst must not be negative", l.Name)
	case l.Calendar == NoCalendar && (l.Window < time.Second || l.Window > 31*24*time.Hour):
		return fmt.Errorf("limit %q: window %s is outside 1s..31d", l.Name, l.Window)
	case l.Calendar == CalendarMonth && l.Algorithm != FixedWindow:
		return fmt.Errorf("limit %q: a calendar month window needs fixed_window", l.Name)
	}
	return nil
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
	for name, want := range l.Match {
		if got, ok := attrs.Get(name); !ok || got != want {
			return false
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
	return Counter{
		Key:       CounterKey(l, attrs),
		Algorithm: l.Algorithm,
		Limit:     l.Limit,
		Burst:     l.Burst,
		Window:    l.Window,
		Calendar:  l.Calendar,
	}
}
