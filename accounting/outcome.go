package accounting

// Outcome names what a reservation decided, for metrics and traces. The
// Limiter keeps no count of its own: its caller sees every decision (and
// extproc counts them, with the refusals that never reach the limiter,
// in tokenwarden_requests_total), so one count, the caller's, is the
// record. A program that calls Reserve itself counts Outcome().
//
// A Reserve that returns an error (the store failed under a fail-closed
// limit) has no Decision; extproc counts it as "unavailable".
type Outcome string

// The outcomes of a Decision.
const (
	// OutcomeAdmitted: reserved on every applicable limit.
	OutcomeAdmitted Outcome = "admitted"
	// OutcomeFailedOpen: admitted without a reservation, because the
	// store failed and every applicable limit fails open.
	OutcomeFailedOpen Outcome = "failed_open"
	// OutcomeRejected: a limit has too little left now.
	OutcomeRejected Outcome = "rejected"
	// OutcomeNeverFits: the request is larger than a limit's capacity,
	// and waiting will not help.
	OutcomeNeverFits Outcome = "never_fits"
	// OutcomeRunOver: an agent run's lifetime budget is spent or its
	// time is up; the run will not be admitted again.
	OutcomeRunOver Outcome = "run_over"
	// OutcomeDowngraded: refused on the model it named, and admitted on
	// a fallback model its limit's on_exhausted names (see
	// [Limiter.ReserveOrDowngrade]). No single Decision is one: the
	// caller that rewrites the request counts it in place of the
	// fallback's OutcomeAdmitted.
	OutcomeDowngraded Outcome = "downgraded"
	// OutcomeCancelled: the caller went away while its request waited
	// for capacity ([Limiter.ReserveWaiting]); nothing was reserved,
	// and no one is answered.
	OutcomeCancelled Outcome = "cancelled"
)

// Outcome returns the decision's outcome.
func (d *Decision) Outcome() Outcome {
	switch {
	case d.Admitted && d.FailedOpen:
		return OutcomeFailedOpen
	case d.Admitted:
		return OutcomeAdmitted
	case d.Trip.NeverFits:
		return OutcomeNeverFits
	case d.Trip.Final:
		// Not a run budget that requests in flight may yet leave room
		// in (Trip.Settling): that is a rejection like any other.
		return OutcomeRunOver
	case d.Wait.Outcome == WaitCancelled:
		return OutcomeCancelled
	}
	return OutcomeRejected
}
