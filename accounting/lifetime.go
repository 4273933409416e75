package accounting

// A lifetime limit (algorithm lifetime) is a budget for the whole life of
// its scope rather than a rate: typically scoped by an agent run's id, it
// caps the run's steps (requests), tokens or cost, however long the run
// takes, and Window caps how long the run may go on (config key
// max_duration). The run starts at the scope's first admitted request,
// on the store's clock; from then on every request is checked against
// what the run has spent, and none is admitted once the run's Window has
// passed — both decided by the store in the same atomic step as the
// charge, so that replicas agree and no request slips in at the edge.
//
// A lifetime counter never frees anything: a request it refuses will be
// refused again, so the reply tells the client not to retry (see
// [Trip.Final]). Its counter is kept Window plus [LifetimeGrace] after
// the run's first request and then forgotten: a run id used again after
// that starts a new run.

// LifetimeGrace is how long a run's counter outlives the run's
// wall-clock cap: the longest a reservation's record lasts, so that every
// settlement of the run's requests (which comes while its record counts,
// or never; see [RecordExpiry]) still finds the counter, and a client
// that goes on using the run id just after the cap is told the run is
// over rather than given a fresh budget.
const LifetimeGrace = RecordTTL + RecordGrain

// LifetimeEnd returns the time (µs) at which a run that started at start
// (µs) on counter c stops admitting requests, and the time until which
// its counter is kept.
func LifetimeEnd(c *Counter, start int64) (end, keep int64) {
	end = start + c.Window.Microseconds()
	return end, end + LifetimeGrace.Microseconds()
}

// validateLifetime checks a lifetime limit: its Window is the run's
// wall-clock cap (max_duration), within MinWindow..MaxWindow.
func (l *Limit) validateLifetime() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, FieldErrorf(field, format, args...))
	}
	if l.Limit <= 0 {
		bad("limit", "must be positive")
	}
	if l.Burst != 0 {
		bad("burst", "only a token_bucket has a burst")
	}
	if l.Calendar != NoCalendar || l.Window < MinWindow || l.Window > MaxWindow {
		bad("max_duration", "%s is outside 1s..31d", l.Window)
	}
	if l.OnStoreError > FailOpen {
		bad("on_store_error", "unknown fail mode %d", l.OnStoreError)
	}
	return errs
}
