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

// waitNote describes a limit's on_exhausted wait for check-config; empty
// without one.
func waitNote(l *accounting.Limit) string {
	if l.WaitUpTo <= 0 {
		return ""
	}
	return fmt.Sprintf(", waits up to %s for capacity when exhausted", l.WaitUpTo)
}

// waitTimeoutNote tells the operator what Envoy needs for the limits'
// waits: a request held that long keeps its ext_proc message unanswered,
// which Envoy allows only up to the filter's max_message_timeout. Empty
// when no limit waits.
func waitTimeoutNote(limits []accounting.Limit) string {
	var longest time.Duration
	for i := range limits {
		longest = max(longest, limits[i].WaitUpTo)
	}
	if longest == 0 {
		return ""
	}
	return fmt.Sprintf("limits hold refused requests up to %s: the ext_proc filter's max_message_timeout must be at least %s, or Envoy answers 504 when message_timeout expires",
		longest, longest+accounting.WaitMargin)
}
