package extproc

import (
	"fmt"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// runOverMessage is the message of a 429 from a lifetime budget (an
// agent run's): it says whether the run is over — its wall-clock cap has
// passed, or its budget is spent —, this request is larger than the
// run's whole budget, or only this request does not fit in what the run
// has left. Either way the reply carries x-should-retry:
// false, which the OpenAI and Anthropic SDKs honour, as no retry of the
// same run can succeed — unless the run's own requests in flight hold
// what it lacks (Trip.Settling): then it says only what the run has
// left, and the reply goes on to say when to try again.
func runOverMessage(t *accounting.Trip) string {
	l := t.Limit
	d := l.Dimension
	switch {
	case t.Settling:
		return fmt.Sprintf("Run budget %s on %s: this request needs %s but the run has %s left of its %s.",
			l.Name, d, formatAmount(d, t.Requested), formatAmount(d, max(0, t.Remaining)), formatAmount(d, l.Limit))
	case t.Expired:
		return fmt.Sprintf("Run budget %s: the run is over, its %s since its first request have passed. Retrying will not help: start a new run.",
			l.Name, l.Window)
	case t.NeverFits:
		// Before what is left: a new run would not fit it either.
		return fmt.Sprintf("Run budget %s on %s: this request needs %s but the run's whole budget is %s. Retrying will not help, nor will a new run: reduce the input or the output cap.",
			l.Name, d, formatAmount(d, t.Requested), formatAmount(d, l.Limit))
	case t.Remaining <= 0:
		return fmt.Sprintf("Run budget %s: the run is over, it has spent its %s %s. Retrying will not help: start a new run.",
			l.Name, formatAmount(d, l.Limit), d)
	}
	return fmt.Sprintf("Run budget %s on %s: this request needs %s but the run has %s left of its %s. Retrying will not help: reduce the request, or start a new run.",
		l.Name, d, formatAmount(d, t.Requested), formatAmount(d, t.Remaining), formatAmount(d, l.Limit))
}
