package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// The sharded layout (Options.ShardBy): every Redis key is a hash tag
// followed by the counter key, "{tag}tw2:…". The tag of a counter whose
// limit is scoped by the ShardBy attribute is derived from that
// attribute's value, so all of one principal's counters share a slot;
// any other counter's tag is derived from its whole key, so global,
// per-model and per-user counters spread over the slots too.
//
// The tag is computed from the counter key alone (ShardTag), so the
// read side needs nothing but the key (Peek, ResetCounter, the keys Top
// finds). It is 8 hex digits of a 32-bit FNV-1a hash: it never holds a
// brace, and it comes first, so Redis hashes the tag and nothing else
// whatever bytes the scope values hold (a value with braces in it sits
// after the tag's '}' and cannot pick a slot). Two principals whose
// values hash alike only share a slot; their keys stay apart, since the
// counter key after the tag is CounterKey's, length-prefixed and unique
// per tuple. No one can forge another tenant's tag to reach its
// counters: the tag chooses a slot, not a key.
const shardTagLen = 8

// ShardTag returns the hash tag (without braces) of the counter with key
// counterKey under Options.ShardBy: derived from the ShardBy attribute's
// value when the counter's limit is scoped by it, from the whole key
// otherwise. It is "" when ShardBy is not set.
func (s *Store) ShardTag(counterKey string) string {
	tag, _ := s.shardTag(counterKey)
	return tag
}

// shardTag is ShardTag, and whether the counter's limit is scoped by the
// ShardBy attribute (the tag is the principal's): groups needs both, and
// finding the attribute's value once serves both.
func (s *Store) shardTag(counterKey string) (tag string, principal bool) {
	if s.shardBy == "" {
		return "", false
	}
	h := fnv.New32a()
	v, principal := accounting.KeyScopeValue(counterKey, s.shardBy)
	if principal {
		// 'p' and 'k' keep a value from ever hashing as a key would.
		h.Write([]byte{'p'})
		h.Write([]byte(v))
	} else {
		h.Write([]byte{'k'})
		h.Write([]byte(counterKey))
	}
	var b [shardTagLen]byte
	const hexDigits = "0123456789abcdef"
	sum := h.Sum32()
	for i := shardTagLen - 1; i >= 0; i-- {
		b[i] = hexDigits[sum&0xf]
		sum >>= 4
	}
	return string(b[:]), principal
}

// groupRecordKey is the key of reservation id's record in hash slot slot:
// one per slot the reservation touches, each written by that slot's step.
func groupRecordKey(slot int, id string) string {
	return "{" + slotTags()[slot] + "}" + RecordKeyPrefix + id
}

// groupScan is how many slots groups looks through before it indexes
// them.
const groupScan = 16

// group is the items of one call that fall in one hash slot.
type group struct {
	slot int
	// principal: the group holds a counter scoped by ShardBy.
	principal bool
	// idx are the items' positions in the call, in order.
	idx []int
}

// groups splits the counter keys of a call on the sharded layout by hash
// slot, in the order the steps take them: the principal's slot first
// (its limits are the ones most likely to refuse, and refusing first
// costs no refund), then
// the others by slot number. Every replica takes any two slots in the
// same order, so two decisions never wait on each other in a cycle (not
// that Redis would let them: each step is one atomic call).
func (s *Store) groups(keys []string) []group {
	var gs []group
	// A decision's few slots are found by looking through them; the
	// thousands of a Peek for Top (every slot, up to MaxTopScan keys)
	// by an index, or splitting them costs seconds.
	var index map[int]int
	for i, k := range keys {
		// The tag leads the Redis key and holds no brace, so the key's
		// slot is the tag's: hashing it needs no Redis key built.
		tag, principal := s.shardTag(k)
		slot := int(crc16(tag)) % slotCount
		j := -1
		if index != nil {
			if at, ok := index[slot]; ok {
				j = at
			}
		} else {
			j = slices.IndexFunc(gs, func(g group) bool { return g.slot == slot })
		}
		if j < 0 {
			gs = append(gs, group{slot: slot})
			j = len(gs) - 1
			if index == nil && len(gs) > groupScan {
				index = make(map[int]int, min(len(keys), slotCount))
				for at, g := range gs {
					index[g.slot] = at
				}
			} else if index != nil {
				index[slot] = j
			}
		}
		gs[j].idx = append(gs[j].idx, i)
		gs[j].principal = gs[j].principal || principal
	}
	slices.SortFunc(gs, func(a, b group) int {
		if a.principal != b.principal {
			if a.principal {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.slot, b.slot)
	})
	return gs
}

// reserveSharded is Reserve on the sharded layout: one call of tw_reserve
// per slot, in the order of groups, each with its own record in its
// slot. The steps share the Store's timeout. When a step refuses, or
// fails, the steps before it are released (tw_release, each within a
// timeout of its own and whatever the caller's context says), and so is
// the failed step itself when its failure was ambiguous: the caller then
// sees the whole request as not applied, as one call that refused would
// leave it. Only when such a release fails too is the error ambiguous,
// and the Limiter's own release (of every slot) takes over.
func (s *Store) reserveSharded(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
	keys := make([]string, len(req.Items))
	for i := range req.Items {
		keys[i] = req.Items[i].Key
	}
	gs := s.groups(keys)
	res := accounting.ReserveResult{States: make([]accounting.CounterState, len(req.Items))}
	stepCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for k, g := range gs {
		sub := subReserve(&req, g)
		got, err := s.reserveOnce(stepCtx, &sub, groupRecordKey(g.slot, req.ID))
		switch {
		case errors.Is(err, accounting.ErrReleased):
			// Release for this ID got here first; it visits the slots
			// in this order, so it has refunded the earlier steps or
			// will. Releasing them again is a no-op if so.
			s.undo(ctx, &req, gs[:k])
			return accounting.ReserveResult{}, err
		case err != nil:
			undo := gs[:k]
			if errors.Is(err, accounting.ErrStoreUnavailable) && !errors.Is(err, accounting.ErrNotApplied) {
				// Step k may have landed after all. (Any other error
				// refused the step before it reached Redis.)
				undo = gs[:k+1]
			}
			switch {
			case len(undo) == 0:
				return accounting.ReserveResult{}, err
			case s.undo(ctx, &req, undo):
				// Every step is refunded or tombstoned: nothing is
				// applied, and the Limiter need not release.
				return accounting.ReserveResult{}, fmt.Errorf("%w (step %d of %d; %d steps undone)", notAppliedNow(err), k+1, len(gs), len(undo))
			}
			// Some step may still be charged: ambiguous, whatever step
			// k's own failure was, so that the Limiter releases.
			return accounting.ReserveResult{}, fmt.Errorf("%w: step %d of %d, and undoing the steps before it failed: %v", accounting.ErrStoreUnavailable, k+1, len(gs), err)
		}
		for j, i := range g.idx {
			res.States[i] = got.States[j]
		}
		if !got.Admitted {
			// What was left before this decision, as a refusal reports
			// it, for the steps already made; the steps not made were
			// not asked and are reported as fitting.
			for _, done := range gs[:k] {
				for _, i := range done.idx {
					if st := &res.States[i]; st.Fits {
						st.Remaining += req.Items[i].Amount
						st.InFlight = max(0, st.InFlight-req.Items[i].Amount)
					}
				}
			}
			for _, later := range gs[k+1:] {
				for _, i := range later.idx {
					res.States[i] = accounting.CounterState{Fits: true, Remaining: req.Items[i].Capacity()}
				}
			}
			if !s.undo(ctx, &req, gs[:k]) {
				// An earlier step may stay charged: ambiguous, so
				// that the Limiter releases the whole request.
				return accounting.ReserveResult{}, fmt.Errorf("%w: refused in step %d of %d, and undoing the steps before it failed", accounting.ErrStoreUnavailable, k+1, len(gs))
			}
			return res, nil
		}
	}
	res.Admitted = true
	// A step whose items were all optional and none fitted charged
	// nothing but wrote a record, which no settlement will name (it
	// leaves such items out): delete it now rather than hold it for
	// RecordTTL, when another step charged something (whose record
	// settlement and release will find). A reservation that charged
	// nothing at all keeps its records, as one call's would, so that its
	// release finds them.
	var idle []group
	for _, g := range gs {
		if allSkipped(&req, res.States, g) {
			idle = append(idle, g)
		}
	}
	if len(idle) < len(gs) {
		s.undo(ctx, &req, idle)
	}
	return res, nil
}

// undo releases the steps gs of req, each with a timeout of its own and
// regardless of ctx's cancellation (a refund must land when the caller
// has gone), and reports whether every release answered.
func (s *Store) undo(ctx context.Context, req *accounting.ReserveRequest, gs []group) bool {
	ctx = context.WithoutCancel(ctx)
	ok := true
	for _, g := range gs {
		sub := subReserve(req, g)
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := s.releaseOnce(rctx, &sub, groupRecordKey(g.slot, req.ID))
		cancel()
		ok = ok && err == nil
	}
	return ok
}

// settleSharded is Settle on the sharded layout: one call of tw_settle
// per slot the settlement's items fall in, each applying only if that
// slot's record is there. Every slot is tried, each within a timeout of
// its own, even after one fails, so that a retry has less to do. A
// retried settlement after a partial one books only the slots it did
// not book before: each slot is settled at most once by its record.
//
// It returns the first failure, if any (the Limiter retries the whole
// settlement); otherwise nil when at least one slot applied, and
// ErrNoReservation when none found its record: the reservation was
// settled already (or its records expired), as a single call reports.
func (s *Store) settleSharded(ctx context.Context, req accounting.SettleRequest) error {
	keys := make([]string, len(req.Items))
	for i := range req.Items {
		keys[i] = req.Items[i].Key
	}
	if len(keys) == 0 {
		// Nothing to book and no slot to go to: a reservation that
		// charged nothing (the Limiter settles none) keeps its records
		// until RecordTTL.
		return nil
	}
	var firstErr error
	applied := false
	for _, g := range s.groups(keys) {
		sub := accounting.SettleRequest{ID: req.ID, Items: make([]accounting.SettleItem, len(g.idx))}
		for j, i := range g.idx {
			sub.Items[j] = req.Items[i]
		}
		gctx, cancel := context.WithTimeout(ctx, s.timeout)
		err := s.settleOnce(gctx, &sub, groupRecordKey(g.slot, req.ID))
		cancel()
		switch {
		case err == nil:
			applied = true
		case errors.Is(err, accounting.ErrNoReservation):
		case firstErr == nil:
			firstErr = err
		}
	}
	switch {
	case firstErr != nil:
		return firstErr
	case !applied:
		return accounting.ErrNoReservation
	}
	return nil
}

// releaseSharded is Release on the sharded layout: tw_release in every
// slot of req, each within a timeout of its own, in the order Reserve
// takes them. A slot whose step was made is refunded; one whose step
// never landed gets its tombstone, so that a late step charges nothing.
// It reports released when any slot held a record, and the first
// failure, after trying every slot.
func (s *Store) releaseSharded(ctx context.Context, req accounting.ReserveRequest) (bool, error) {
	keys := make([]string, len(req.Items))
	for i := range req.Items {
		keys[i] = req.Items[i].Key
	}
	var firstErr error
	released := false
	for _, g := range s.groups(keys) {
		sub := subReserve(&req, g)
		gctx, cancel := context.WithTimeout(ctx, s.timeout)
		ok, err := s.releaseOnce(gctx, &sub, groupRecordKey(g.slot, req.ID))
		cancel()
		released = released || ok
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return released, firstErr
}

// subReserve is the part of req that falls in g's slot.
func subReserve(req *accounting.ReserveRequest, g group) accounting.ReserveRequest {
	sub := accounting.ReserveRequest{ID: req.ID, Items: make([]accounting.ReserveItem, len(g.idx))}
	for j, i := range g.idx {
		sub.Items[j] = req.Items[i]
	}
	return sub
}

// allSkipped reports whether every item of g is optional and was left
// uncharged by its admitted step.
func allSkipped(req *accounting.ReserveRequest, states []accounting.CounterState, g group) bool {
	for _, i := range g.idx {
		if !req.Items[i].Optional || states[i].Fits {
			return false
		}
	}
	return true
}

// notAppliedNow marks err, a failure whose effects have been undone, as
// not applied.
func notAppliedNow(err error) error {
	if errors.Is(err, accounting.ErrNotApplied) {
		return err
	}
	return fmt.Errorf("%w: %w", accounting.ErrNotApplied, err)
}
