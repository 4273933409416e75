package main

import (
	"fmt"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// concurrentLine describes a concurrent limit for check-config: it has
// no window, only the lease that frees a crashed replica's requests.
func concurrentLine(l *accounting.Limit, scope string) string {
	return fmt.Sprintf("  %-24s %d requests in flight at once, %s, leases of a replica that dies free after %s",
		l.Name, l.Limit, scope, humanWindow(l.Window))
}

// lifetimeLine describes a lifetime limit for check-config: a budget for
// the scope's whole life (an agent run), not per window.
func lifetimeLine(l *accounting.Limit, scope string) string {
	return fmt.Sprintf("  %-24s %s %s in all, %s, lifetime (never resets; over %s after the first request)",
		l.Name, formatLimit(l.Dimension, l.Limit), l.Dimension, scope, humanWindow(l.Window))
}

// exhaustedLine is what check-config adds to a limit's line for its
// on_exhausted: where a request it refuses goes instead of the 429 (after
// its wait, when it has one: see waitNote).
func exhaustedLine(l *accounting.Limit) string {
	to := l.OnExhausted.DowngradeTo
	if to == "" {
		return ""
	}
	when := "when exhausted"
	if l.OnExhausted.WaitUpTo > 0 {
		when = "when the wait ends refused"
	}
	return fmt.Sprintf("; %s, downgrades %s to %s (reserved on %s's limits, without a wait; x-tokenwarden-model: %s for the routes)",
		when, l.Match[accounting.AttributeModel], to, to, to)
}

// reserveForText describes a limit's reserve for check-config: what the
// privileged tier keeps, and what everyone else is held to.
func reserveForText(l *accounting.Limit) string {
	r := l.ReserveFor
	held := r.Reserved(l.Limit)
	text := fmt.Sprintf(", keeps %g%% (%s) for %s=%s: other requests held to %s",
		r.Share*100, formatLimit(l.Dimension, held), r.Attribute, r.Value, formatLimit(l.Dimension, l.Limit-held))
	if l.From != nil {
		text += " (of the value without the attribute; the share applies to each request's value)"
	}
	return text
}

// waitNote describes a limit's on_exhausted wait for check-config; empty
// without one.
func waitNote(l *accounting.Limit) string {
	if l.OnExhausted.WaitUpTo <= 0 {
		return ""
	}
	return fmt.Sprintf(", waits up to %s for capacity when exhausted", l.OnExhausted.WaitUpTo)
}

// waitTimeoutNote tells the operator what Envoy needs for the limits'
// waits: a request held that long keeps its ext_proc message unanswered,
// which Envoy allows only up to the filter's max_message_timeout. Empty
// when no limit waits.
func waitTimeoutNote(limits []accounting.Limit) string {
	var longest time.Duration
	for i := range limits {
		longest = max(longest, limits[i].OnExhausted.WaitUpTo)
	}
	if longest == 0 {
		return ""
	}
	return fmt.Sprintf("limits hold refused requests up to %s: the ext_proc filter's max_message_timeout must be at least %s, or Envoy answers 504 when message_timeout expires",
		longest, longest+accounting.WaitMargin)
}
