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
