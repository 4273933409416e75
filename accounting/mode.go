package accounting

import "fmt"

// Mode says whether a limit is enforced or only watched.
//
// A shadow limit is how a new or tighter limit is tried on live traffic
// before it can hurt anyone: it is evaluated and counted exactly as an
// enforced one would be, but it never rejects a request, never fails one
// when the store does, and never shows in the rate-limit headers.
// Rolling it out is changing its mode to enforce; its counter (whose key
// does not depend on the mode) carries over as it stands.
//
// A shadow counter is charged only when the request fits it, as an
// enforced limit would charge only the requests it admits, so that it
// counts what enforcing it would have let through and answers the
// question an operator asks of it: "if I enforce this, what would it
// reject?". A request the enforced limits reject charges no counter,
// shadow ones included, and is not a shadow decision.
type Mode uint8

const (
	// Enforce rejects requests that do not fit: the zero value.
	Enforce Mode = iota
	// Shadow counts requests that fit and reports those that would not,
	// admitting both.
	Shadow
)

// String returns the mode's config name.
func (m Mode) String() string {
	if m == Shadow {
		return "shadow"
	}
	return "enforce"
}

// ParseMode parses a mode name from config; "" is Enforce.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "enforce":
		return Enforce, nil
	case "shadow":
		return Shadow, nil
	}
	return 0, fmt.Errorf("unknown mode %q (want enforce or shadow)", s)
}
