package memstore

import (
	"math"

	"github.com/tokenwarden/tokenwarden/accounting"
)

const numSlots = accounting.SlidingSlots + 1

// counter is the state of one key. Only the fields of its algorithm are
// used. A sliding window keeps SlidingSlots+1 slots: the current slot, the
// SlidingSlots-1 whole slots before it, and the one that straddles the
// window's start and is counted in full.
type counter struct {
	// expires is when the counter's state holds nothing any more (µs),
	// keep until when it is kept all the same (see until).
	expires int64
	keep    int64

	// key is the counter's key in the store's map; due is when the
	// store's expiry looks at it next, and idx its place in the store's
	// heap (see expiry.go).
	key string
	due int64
	idx int

	// fixed_window
	window int64
	used   int64

	// sliding_window: slots[j] is the amount of slot newest-numSlots+1+j,
	// so slots[numSlots-1] is the newest slot charged; hasSlots says
	// whether any was.
	newest   int64
	slots    [numSlots]int64
	hasSlots bool

	// token_bucket
	tokens float64
	at     int64

	// leases (see leases.go)
	leases map[string]int64
	oldest int64

	// pieces hold what reservations in flight hold (see inflight.go).
	pieces []piece
	// born is when the counter was last reset (µs; 0: never), its
	// CounterState.Epoch: a reservation made before changes nothing on
	// it. keep keeps the counter until no such reservation can settle.
	born int64
}

func newCounter(c *accounting.Counter, now int64) *counter {
	ct := &counter{}
	ct.reset(c, now)
	return ct
}

// reset makes ct a fresh counter for c, keeping its place in the store.
func (ct *counter) reset(c *accounting.Counter, now int64) {
	*ct = counter{key: ct.key, due: ct.due, idx: ct.idx, pieces: ct.pieces[:0]}
	ct.fresh(c, now)
}

// refresh starts ct's state afresh where it expired while something
// keeps the counter: its born, and a token bucket's pieces, which
// outlive its being full, stay with its keep.
func (ct *counter) refresh(c *accounting.Counter, now int64) {
	keep, born, pieces := ct.keep, ct.born, ct.pieces[:0]
	if c.Algorithm == accounting.TokenBucket {
		pieces = ct.pieces
	}
	ct.reset(c, now)
	ct.keep, ct.born, ct.pieces = keep, born, pieces
}

// fresh sets the state of a counter that holds nothing.
func (ct *counter) fresh(c *accounting.Counter, now int64) {
	if c.Algorithm == accounting.TokenBucket {
		ct.tokens = float64(c.Capacity())
		ct.at = now
	}
}

// check reports whether amount fits in the counter at now without changing
// it, except for forgetting what has expired.
func (ct *counter) check(c *accounting.Counter, amount, now int64) accounting.CounterState {
	var st accounting.CounterState
	switch c.Algorithm {
	case accounting.FixedWindow:
		st = ct.checkFixed(c, amount, now)
	case accounting.TokenBucket:
		st = ct.checkBucket(c, amount, now)
	case accounting.Leases:
		// Every lease is a reservation in flight.
		st = ct.checkLeases(c, amount, now)
		st.InFlight = max(0, c.Capacity()-st.Remaining)
		st.Epoch = ct.born
		return st
	case accounting.Lifetime:
		st = ct.checkLifetime(c, amount, now)
	default:
		st = ct.checkSliding(c, amount, now)
	}
	st.InFlight = inFlight(c, ct.held(c, now), st.Remaining)
	st.Epoch = ct.born
	return st
}

// commit charges amount (already checked) and updates st to describe the
// counter afterwards.
func (ct *counter) commit(c *accounting.Counter, amount, now int64, st *accounting.CounterState) {
	ct.charge(c, amount, now, st)
	ct.hold(c, amount, now)
	st.InFlight = inFlight(c, ct.held(c, now), st.Remaining)
}

// charge is commit's change to the counter's usage.
func (ct *counter) charge(c *accounting.Counter, amount, now int64, st *accounting.CounterState) {
	switch c.Algorithm {
	case accounting.Lifetime:
		ct.commitLifetime(c, amount, st)
	case accounting.FixedWindow:
		ct.used += amount
		st.Remaining -= amount
		st.Mark = ct.window
	case accounting.TokenBucket:
		ct.refill(c, now)
		ct.tokens -= float64(amount)
		st.Remaining = int64(math.Floor(ct.tokens))
		st.Reset = accounting.Micros(ct.bucketFullIn(c))
		ct.expires = now + ct.bucketFullIn(c)
	default:
		slot := accounting.SlotLength(c)
		cur := now / slot
		ct.slotAdd(c, cur, amount)
		st.Remaining -= amount
		st.Mark = cur
		st.Reset = accounting.Micros((cur+numSlots)*slot - now)
	}
}

// settle replaces reserved with actual on the window or slot the charge
// was booked in (mark), and takes what the reservation, made at t (µs),
// held in flight out of its piece. If that window has passed, an extra
// charge is booked on the current one and a refund is dropped: the old
// window's usage no longer counts, and refunding it into the current
// window would hand out budget that was never used there. (Nor does the
// current window hold anything for the reservation in flight.)
func (ct *counter) settle(c *accounting.Counter, reserved, actual, mark, t, now int64) {
	delta := actual - reserved
	switch c.Algorithm {
	case accounting.Lifetime:
		if ct.window != 0 && ct.window == mark {
			ct.unhold(c, reserved, t)
		}
		ct.settleLifetime(delta, mark)
	case accounting.FixedWindow:
		idx, end := accounting.FixedWindowAt(c, now)
		switch {
		case mark == idx && ct.window == idx:
			ct.unhold(c, reserved, t)
			ct.used = max(0, ct.used+delta)
		case delta > 0:
			ct.rollFixed(idx, end)
			ct.used += delta
		}
	case accounting.TokenBucket:
		ct.unhold(c, reserved, t)
		if delta == 0 {
			return
		}
		ct.refill(c, now)
		ct.tokens = min(float64(c.Capacity()), ct.tokens-float64(delta))
		ct.expires = now + ct.bucketFullIn(c)
	default:
		ct.unhold(c, reserved, t)
		cur := now / accounting.SlotLength(c)
		target := mark
		if mark < cur-accounting.SlidingSlots {
			if delta <= 0 {
				return
			}
			target = cur
		}
		if delta != 0 {
			ct.slotAdd(c, target, delta)
		}
	}
}

// markAt returns the mark a reservation made at time t (µs) got on the
// counter: its window or slot.
func markAt(c *accounting.Counter, t int64) int64 {
	switch c.Algorithm {
	case accounting.FixedWindow:
		idx, _ := accounting.FixedWindowAt(c, t)
		return idx
	case accounting.SlidingWindow:
		return t / accounting.SlotLength(c)
	}
	return 0
}

// slotAdd adds delta to a sliding window's slot target, never below zero.
// A slot newer than the newest moves the slots forward, dropping those
// that leave. (A target older than the oldest slot held can only follow a
// clock that went back by more than a window; it is charged to the oldest
// slot held, so that nothing charged is forgotten early.)
func (ct *counter) slotAdd(c *accounting.Counter, target, delta int64) {
	switch {
	case !ct.hasSlots:
		ct.newest, ct.slots, ct.hasSlots = target, [numSlots]int64{}, true
	case target > ct.newest:
		d := target - ct.newest
		for j := range ct.slots {
			if int64(j)+d < numSlots {
				ct.slots[j] = ct.slots[int64(j)+d]
			} else {
				ct.slots[j] = 0
			}
		}
		ct.newest = target
	case target < ct.newest-accounting.SlidingSlots:
		target = ct.newest - accounting.SlidingSlots
	}
	j := target - ct.newest + numSlots - 1
	ct.slots[j] = max(0, ct.slots[j]+delta)
	ct.expires = (ct.newest + numSlots) * accounting.SlotLength(c)
}

func (ct *counter) rollFixed(idx, end int64) {
	if ct.window != idx {
		// What was in flight was charged to the window that ended.
		ct.window, ct.used, ct.pieces = idx, 0, ct.pieces[:0]
	}
	ct.expires = end
}

func (ct *counter) checkFixed(c *accounting.Counter, amount, now int64) accounting.CounterState {
	idx, end := accounting.FixedWindowAt(c, now)
	ct.rollFixed(idx, end)
	st := accounting.CounterState{
		Remaining: c.Limit - ct.used,
		Reset:     accounting.Micros(end - now),
		Mark:      idx,
	}
	switch {
	case amount > c.Limit:
		st.NeverFits = true
	case ct.used+amount <= c.Limit:
		st.Fits = true
	default:
		st.RetryAfter = accounting.Micros(end - now)
	}
	return st
}

func (ct *counter) checkSliding(c *accounting.Counter, amount, now int64) accounting.CounterState {
	slot := accounting.SlotLength(c)
	cur := now / slot
	// first is the slot held at slots[0].
	first := ct.newest - numSlots + 1
	var used int64
	newest := -1
	if ct.hasSlots {
		// Count the slots from the oldest still in the window.
		for j := max(0, cur-accounting.SlidingSlots-first); j < numSlots; j++ {
			if ct.slots[j] > 0 {
				used += ct.slots[j]
				newest = int(j)
			}
		}
	}
	st := accounting.CounterState{Remaining: c.Limit - used, Mark: cur}
	if newest >= 0 {
		st.Reset = accounting.Micros((first+int64(newest)+numSlots)*slot - now)
	}
	switch {
	case amount > c.Limit:
		st.NeverFits = true
	case used+amount <= c.Limit:
		st.Fits = true
	default:
		// Slot k leaves the count at (k+numSlots)*slot; free slots oldest
		// first until the amount fits.
		need := used + amount - c.Limit
		for k := cur - accounting.SlidingSlots; k <= cur; k++ {
			j := k - first
			if j < 0 || j >= numSlots {
				continue
			}
			need -= ct.slots[j]
			if need <= 0 {
				st.RetryAfter = accounting.Micros((k+numSlots)*slot - now)
				break
			}
		}
	}
	return st
}

func (ct *counter) refill(c *accounting.Counter, now int64) {
	if now > ct.at {
		ct.tokens = min(float64(c.Capacity()), ct.tokens+float64(now-ct.at)*accounting.BucketRate(c))
		ct.at = now
	}
}

// bucketFullIn returns µs until the bucket is full again.
func (ct *counter) bucketFullIn(c *accounting.Counter) int64 {
	return accounting.BucketFullIn(c, ct.tokens)
}

// checkBucket looks at the bucket as refilled to now without storing the
// refill: a rejected request must leave the state exactly as it was, as
// the Redis script (which writes nothing on a rejection) does, so the two
// stores refill in the same steps and agree to the last bit.
func (ct *counter) checkBucket(c *accounting.Counter, amount, now int64) accounting.CounterState {
	view := *ct
	view.refill(c, now)
	st := accounting.CounterState{
		Remaining: int64(math.Floor(view.tokens)),
		Reset:     accounting.Micros(view.bucketFullIn(c)),
	}
	switch {
	case amount > c.Capacity():
		st.NeverFits = true
	case float64(amount) <= view.tokens:
		st.Fits = true
	default:
		st.RetryAfter = accounting.Micros(int64(math.Ceil((float64(amount) - view.tokens) / accounting.BucketRate(c))))
	}
	return st
}
