package redisstore

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// The Store runs its decisions as functions of one Redis function library
// (FUNCTION LOAD, Redis 7.0 and later) rather than as EVAL scripts: a
// script's body runs on every call, creating each of its helper functions
// anew, which cost about as much Redis time as all the arithmetic; a
// library defines them once, when it is loaded.
var (
	//go:embed library.lua
	libraryLua string
	//go:embed counters.lua
	countersLua string
	//go:embed functions.lua
	functionsLua string

	// lib is the library as the Store loads it: the three files, in
	// order, as one.
	lib = newLibrary(libraryLua + countersLua + functionsLua)
)

// library is the function library's code and its functions' names.
type library struct {
	name, code               string
	reserve, settle, release string
	peek, hold, reset        string
}

// newLibrary puts in front of body the constants it shares with the
// accounting package, and names the library and its functions after a
// hash of the result: replicas running different versions of tokenwarden
// on one Redis load libraries side by side, each calling its own.
func newLibrary(body string) library {
	consts := fmt.Sprintf("local SLOTS, RECORD_TTL, GRAIN, LEASE_RETRY, LIFETIME_GRACE, RESET_KEPT = %d, %d, %d, %d, %d, %d\n",
		accounting.SlidingSlots, accounting.RecordTTL.Microseconds(), accounting.RecordGrain.Microseconds(),
		accounting.ConcurrentRetryAfter.Microseconds(), accounting.LifetimeGrace.Microseconds(), accounting.ResetKept.Microseconds())
	sum := sha256.Sum256([]byte(consts + body))
	v := hex.EncodeToString(sum[:8])
	return library{
		name:    "tokenwarden_" + v,
		code:    "#!lua name=tokenwarden_" + v + "\n" + consts + "local V = '" + v + "'\n" + body,
		reserve: "tw_reserve_" + v,
		settle:  "tw_settle_" + v,
		release: "tw_release_" + v,
		peek:    "tw_peek_" + v,
		hold:    "tw_hold_" + v,
		reset:   "tw_reset_" + v,
	}
}

// fcall calls the library's function *fn (a pointer, which go-redis
// writes as the string: boxing the string would allocate). When Redis does not have the
// library (it restarted without persistence, FUNCTION FLUSH ran, or a
// failover promoted a server that never had it) it loads it and calls
// again: a call refused for a missing function did nothing.
func (s *Store) fcall(ctx context.Context, fn *string, keys []string, args ...any) *redis.Cmd {
	cmd := s.fcallOnce(ctx, fn, keys, args...)
	err := cmd.Err()
	switch {
	case err == nil:
		return cmd
	case redis.HasErrorPrefix(err, "unknown command"):
		cmd.SetErr(fmt.Errorf("Redis 7.0 or later is needed (FCALL): %w", err))
		return cmd
	case !redis.HasErrorPrefix(err, "Function not found"):
		return cmd
	}
	if err := s.loadLibrary(ctx); err != nil {
		cmd.SetErr(fmt.Errorf("loading the function library: %w", err))
		return cmd
	}
	return s.fcallOnce(ctx, fn, keys, args...)
}

// fcallOnce sends one FCALL, again only while Redis refuses it whole
// with TRYAGAIN or CLUSTERDOWN, within ctx and for half the Store's
// timeout in waits.
//
// go-redis's cluster client would retry a command after a broken
// connection or a read timeout too (its MaxRedirects loop), and a
// tw_reserve sent again after it ran charges twice; the command is marked
// NoRetry so that it only follows MOVED and ASK (and READONLY, a refusal),
// which re-send a command Redis did not run. TRYAGAIN (a slot is
// migrating and the call's keys are split between its two masters) and
// CLUSTERDOWN (a failover is under way) are refusals too, so calling
// again cannot charge twice; a migration moves one principal's few keys
// in milliseconds and a manual failover takes about as long, so a retry
// within the call's timeout usually turns what would be a store error
// (each limit's on_store_error, for every request on that slot
// meanwhile) into a short delay.
func (s *Store) fcallOnce(ctx context.Context, fn *string, keys []string, args ...any) *redis.Cmd {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, "fcall", fn, len(keys))
	for i := range keys {
		// A pointer to the key, which go-redis writes and routes by as it
		// does a string: boxing the string itself would allocate its
		// header, once per key and call.
		cmdArgs = append(cmdArgs, &keys[i])
	}
	cmdArgs = append(cmdArgs, args...)
	// The waits between attempts add up to half the timeout at most: an
	// attempt cut short by the deadline would turn a certain refusal
	// into an ambiguous failure (which costs a release), so the other
	// half is left for the attempts themselves.
	budget := s.timeout / 2
	for wait := time.Millisecond; ; wait = min(2*wait, 10*time.Millisecond) {
		cmd := redis.NewCmd(ctx, cmdArgs...)
		if len(keys) > 0 {
			// Routed by its first key, as the typed FCall is.
			cmd.SetFirstKeyPos(3)
		}
		if s.batch != nil {
			s.batch.process(ctx, cmd)
		} else {
			_ = s.client.Process(ctx, noRetryCmd{cmd})
		}
		if !refusedForNow(cmd.Err()) || wait > budget || !sleep(ctx, wait) {
			return cmd
		}
		budget -= wait
	}
}

// noRetryCmd is a command the client must not send again after a failure
// that may follow its running.
type noRetryCmd struct{ *redis.Cmd }

func (noRetryCmd) NoRetry() bool { return true }

// refusedForNow reports a refusal that a slot migration or a failover in
// progress causes and that ends by itself.
func refusedForNow(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "TRYAGAIN") || redis.HasErrorPrefix(err, "CLUSTERDOWN"))
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// loadLibrary loads the library into Redis, into every master of a
// cluster (a function runs on the master of its keys' slot). Redis
// replicates and persists libraries like data.
func (s *Store) loadLibrary(ctx context.Context) error {
	load := func(ctx context.Context, c redis.Cmdable) error {
		err := c.FunctionLoad(ctx, lib.code).Err()
		if err != nil && redis.HasErrorPrefix(err, "Library") && strings.Contains(err.Error(), "already exists") {
			// Another call (or replica) loaded it first.
			return nil
		}
		return err
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return load(ctx, c) })
	}
	return load(ctx, s.client)
}

// unavailable marks err as a store failure so that the Limiter applies
// each limit's on_store_error, and as not applied when it certainly
// changed nothing.
func unavailable(err error) error {
	if notApplied(err) {
		return fmt.Errorf("%w, %w: %w", accounting.ErrStoreUnavailable, accounting.ErrNotApplied, err)
	}
	return fmt.Errorf("%w: %w", accounting.ErrStoreUnavailable, err)
}

// notApplied reports whether a failed call certainly changed nothing in
// Redis: no connection could be had (a failed dial, an exhausted pool, a
// closed client, or the call's context ended while it waited for its
// turn in a pipeline), so the command was never sent; or Redis answered with
// an error. An error answer means Redis refused the command whole (OOM,
// READONLY, NOPERM, LOADING, CROSSSLOT, a missing function…) or the
// function raised it, which the library can only do before its first
// write: every read and check comes first, and no write it makes can
// fail. A timeout, a reset connection or a malformed answer may follow a
// call that ran.
func notApplied(err error) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, errNotSent)
}
