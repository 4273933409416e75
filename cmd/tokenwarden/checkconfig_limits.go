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

// exhaustedLine is what check-config adds to a limit's line for its
// on_exhausted: where a request it refuses goes instead of the 429.
func exhaustedLine(l *accounting.Limit) string {
	if to := l.OnExhausted.DowngradeTo; to != "" {
		return fmt.Sprintf("; when exhausted, downgrades %s to %s (reserved on %s's limits; x-tokenwarden-model: %s for the routes)",
			l.Match[accounting.AttributeModel], to, to, to)
	}
	return ""
}
