package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
)

// startCheckTimeout bounds the eviction check at start-up. It is longer
// than a store call's timeout because it may have to dial every Redis
// master first; a Redis that refuses connections fails it at once.
const startCheckTimeout = 2 * time.Second

// evictionAdvice says what to do about an evicting Redis; it ends every
// message that reports one.
const evictionAdvice = "set maxmemory-policy noeviction on every Redis master (on a managed service, in its parameter group), " +
	"or set store.redis.allow_eviction: true to accept that a full Redis resets budgets"

// checkEvictionAtStart refuses to start on a Redis that may evict the
// store's counters (a full Redis would forget exhausted budgets), unless
// allow_eviction says otherwise. A Redis that cannot be reached is not a
// reason to refuse: the server starts, each limit's on_store_error decides
// until Redis answers, and /readyz checks the policy on every probe.
func checkEvictionAtStart(ctx context.Context, st *redisstore.Store, allow bool, log *slog.Logger) error {
	if allow {
		log.Warn("Redis eviction policy not checked: store.redis.allow_eviction is true",
			"risk", "under any maxmemory-policy but noeviction a full Redis deletes counters, and exhausted budgets start again")
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, startCheckTimeout)
	defer cancel()
	err := st.CheckEviction(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redisstore.ErrEvictionPolicy):
		return fmt.Errorf("refusing to start (store.redis.allow_eviction is false): %w; %s", err, evictionAdvice)
	default:
		log.Warn("Redis eviction policy not checked: Redis did not answer; starting anyway", "err", err,
			"meanwhile", "limits follow their on_store_error until Redis answers, and /readyz checks the policy on every probe")
		return nil
	}
}

// readiness decides /readyz: the store answers a ping and, for a Redis
// store without allow_eviction, no master may evict its counters.
//
// The policy is read on every probe, not cached: it costs one INFO memory
// per master, the same order as the PING a probe already sends, and
// probes come every few seconds; a cache would only delay noticing a
// CONFIG SET made while the server runs.
type readiness struct {
	store accounting.Store
	// eviction checks the eviction policy; nil when there is none to
	// check (memory store, or allow_eviction).
	eviction func(context.Context) error
	log      *slog.Logger
	// evicting remembers the last verdict, so that a change is logged
	// once rather than on every probe.
	evicting atomic.Bool
}

// check returns nil when ready, or the reason it is not, for the body of
// a 503.
func (r *readiness) check(ctx context.Context) error {
	if err := r.store.Ping(ctx); err != nil {
		return fmt.Errorf("store unreachable: %w", err)
	}
	if r.eviction == nil {
		return nil
	}
	err := r.eviction(ctx)
	switch {
	case errors.Is(err, redisstore.ErrEvictionPolicy):
		if !r.evicting.Swap(true) {
			r.log.Error("Redis may evict counters: /readyz reports not ready", "err", err)
		}
		return fmt.Errorf("store unsafe: %w; %s", err, evictionAdvice)
	case err != nil:
		return fmt.Errorf("store eviction policy unknown: %w", err)
	}
	if r.evicting.Swap(false) {
		r.log.Info("Redis no longer evicts: every master has maxmemory-policy noeviction")
	}
	return nil
}
