package main

import (
	"fmt"

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
