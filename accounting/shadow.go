package accounting

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// ShadowLogEvery is how often, at most, the Limiter logs that one shadow
// limit would have rejected a request. Every would-reject is counted in
// tokenwarden_shadow_decisions_total and named in the request's
// access-log metadata; the log line is a sample, with the number of
// would-rejects since the previous one. A shadow limit is tried exactly
// to learn how much it would reject, which may be a large share of the
// traffic: a line per request would make the log a second access log,
// and cost at every request what a limit is there to save.
const ShadowLogEvery = 10 * time.Second

// shadowLog rate-limits the would-reject lines of one shadow limit.
type shadowLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int64
}

// allow reports whether a would-reject at now is logged, and how many
// were not since the last line that was.
func (s *shadowLog) allow(now time.Time) (bool, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && now.Sub(s.last) < ShadowLogEvery {
		s.suppressed++
		return false, 0
	}
	n := s.suppressed
	s.last, s.suppressed = now, 0
	return true, n
}

// newShadowLogs returns a rate limiter for each shadow limit of limits,
// by name (a limit with limit_from reaches a reservation as a copy that
// holds the request's value), nil if there is none.
func newShadowLogs(limits []Limit) map[string]*shadowLog {
	var m map[string]*shadowLog
	for i := range limits {
		if limits[i].Mode == Shadow {
			if m == nil {
				m = make(map[string]*shadowLog)
			}
			m[limits[i].Name] = &shadowLog{}
		}
	}
	return m
}

// shadowDecisions counts, logs and removes from r.items the shadow items
// of an admitted reservation, states being the store's answer for them:
// one that did not fit was not charged (see [Store.Reserve]), so it is
// not settled, and it is named in r.ShadowRejected. It returns states
// with the same items removed.
func (l *Limiter) shadowDecisions(ctx context.Context, r *Reservation, states []CounterState) []CounterState {
	kept := 0
	for i, it := range r.items {
		st := states[i]
		if it.limit.Mode == Shadow {
			if !st.Fits {
				l.wouldReject(ctx, r, it, st, time.Now())
				continue
			}
			l.m.shadow.WithLabelValues(it.limit.Name, "would_admit").Inc()
		}
		r.items[kept], states[kept] = it, st
		kept++
	}
	r.items = r.items[:kept]
	return states[:kept]
}

// wouldReject records that shadow limit it.limit would have rejected r.
func (l *Limiter) wouldReject(ctx context.Context, r *Reservation, it reservedItem, st CounterState, now time.Time) {
	r.ShadowRejected = append(r.ShadowRejected, it.limit)
	l.m.shadow.WithLabelValues(it.limit.Name, "would_reject").Inc()
	ok, suppressed := l.shadowLogs[it.limit.Name].allow(now)
	if !ok {
		return
	}
	l.log.LogAttrs(ctx, slog.LevelInfo, "shadow limit would reject",
		slog.String("limit", it.limit.Name), slog.String("reservation", r.ID),
		slog.Int64("requested", it.amount), slog.Int64("remaining", st.Remaining),
		slog.Duration("retry_after", st.RetryAfter), slog.Bool("never_fits", st.NeverFits),
		slog.Int64("not_logged_since_last", suppressed))
}

// shadowStoreErrors counts a failed store call on each shadow item of a
// reservation: its limit decided nothing.
func (l *Limiter) shadowStoreErrors(items []reservedItem) {
	for _, it := range items {
		if it.limit.Mode == Shadow {
			l.m.shadow.WithLabelValues(it.limit.Name, "store_error").Inc()
		}
	}
}
