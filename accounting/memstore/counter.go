package memstore

import (
	"math"

	"github.com/tokenwarden/tokenwarden/accounting"
)

const numSlots = accounting.SlidingSlots + 1

// counter is the state of one key. Only the fields of its algorithm are
// used. A sliding window keeps SlidingSlots+1 slots in a ring: the current
// slot, the SlidingSlots-1 whole slots before it, and the one that
// straddles the window's start and is counted in full.
type counter struct {
	// expires is when the counter holds nothing any more (µs).
	expires int64

	// fixed_window
	window int64
	used   int64

	// sliding_window: slotIdx[i] is the slot index held at ring position i.
	slotIdx [numSlots]int64
	slotAmt [numSlots]int64

	// token_bucket
	tokens float64
	at     int64
}

func newCounter(c *accounting.Counter, now int64) *counter {
	ct := &counter{}
	switch c.Algorithm {
	case accounting.TokenBucket:
		ct.tokens = float64(c.Capacity())
		ct.at = now
	case accounting.SlidingWindow:
		for i := range ct.slotIdx {
			ct.slotIdx[i] = math.MinInt64
		}
	}
	return ct
}

// check reports whether amount fits in the counter at now without changing
// it, except for forgetting what has expired.
func (ct *counter) check(c *accounting.Counter, amount, now int64) accounting.CounterState {
	switch c.Algorithm {
	case accounting.FixedWindow:
		return ct.checkFixed(c, amount, now)
	case accounting.TokenBucket:
		return ct.checkBucket(c, amount, now)
	}
	return ct.checkSliding(c, amount, now)
}

// commit charges amount (already checked) and updates st to describe the
// counter afterwards.
func (ct *counter) commit(c *accounting.Counter, amount, now int64, st *accounting.CounterState) {
	switch c.Algorithm {
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
		i := ring(cur)
		if ct.slotIdx[i] != cur {
			ct.slotIdx[i], ct.slotAmt[i] = cur, 0
		}
		ct.slotAmt[i] += amount
		st.Remaining -= amount
		st.Mark = cur
		ct.expires = (cur + numSlots) * slot
		st.Reset = accounting.Micros(ct.expires - now)
	}
}

// settle replaces reserved with actual on the window or slot the charge
// was booked in (mark). If that window has passed, an extra charge is
// booked on the current one and a refund is dropped: the old window's
// usage no longer counts, and refunding it into the current window would
// hand out budget that was never used there.
func (ct *counter) settle(c *accounting.Counter, reserved, actual, mark, now int64) {
	delta := actual - reserved
	if delta == 0 {
		return
	}
	switch c.Algorithm {
	case accounting.FixedWindow:
		idx, end := accounting.FixedWindowAt(c, now)
		ct.rollFixed(idx, end)
		if mark == idx {
			ct.used = max(0, ct.used+delta)
		} else if delta > 0 {
			ct.used += delta
		}
	case accounting.TokenBucket:
		ct.refill(c, now)
		ct.tokens = min(float64(c.Capacity()), ct.tokens-float64(delta))
		ct.expires = now + ct.bucketFullIn(c)
	default:
		slot := accounting.SlotLength(c)
		cur := now / slot
		ct.dropOldSlots(cur)
		target := mark
		if mark < cur-accounting.SlidingSlots {
			if delta < 0 {
				return
			}
			target = cur
		}
		i := ring(target)
		if ct.slotIdx[i] != target {
			ct.slotIdx[i], ct.slotAmt[i] = target, 0
		}
		ct.slotAmt[i] = max(0, ct.slotAmt[i]+delta)
		ct.expires = max(ct.expires, (target+numSlots)*slot)
	}
}

func (ct *counter) rollFixed(idx, end int64) {
	if ct.window != idx {
		ct.window, ct.used = idx, 0
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

func ring(slot int64) int {
	return int(((slot % numSlots) + numSlots) % numSlots)
}

func (ct *counter) dropOldSlots(cur int64) {
	oldest := cur - accounting.SlidingSlots
	for i := range ct.slotIdx {
		if ct.slotIdx[i] < oldest {
			ct.slotIdx[i], ct.slotAmt[i] = math.MinInt64, 0
		}
	}
}

func (ct *counter) checkSliding(c *accounting.Counter, amount, now int64) accounting.CounterState {
	slot := accounting.SlotLength(c)
	cur := now / slot
	ct.dropOldSlots(cur)
	var used, newest int64
	newest = math.MinInt64
	for i := range ct.slotIdx {
		if ct.slotAmt[i] > 0 {
			used += ct.slotAmt[i]
			newest = max(newest, ct.slotIdx[i])
		}
	}
	st := accounting.CounterState{Remaining: c.Limit - used, Mark: cur}
	if newest != math.MinInt64 {
		st.Reset = accounting.Micros((newest+numSlots)*slot - now)
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
			i := ring(k)
			if ct.slotIdx[i] != k {
				continue
			}
			need -= ct.slotAmt[i]
			if need <= 0 {
				st.RetryAfter = accounting.Micros((k+numSlots)*slot - now)
				break
			}
		}
	}
	return st
}

// rate is a token bucket's refill in units per µs.
func rate(c *accounting.Counter) float64 {
	return float64(c.Limit) / float64(c.Window.Microseconds())
}

func (ct *counter) refill(c *accounting.Counter, now int64) {
	if now > ct.at {
		ct.tokens = min(float64(c.Capacity()), ct.tokens+float64(now-ct.at)*rate(c))
		ct.at = now
	}
}

// bucketFullIn returns µs until the bucket is full again.
func (ct *counter) bucketFullIn(c *accounting.Counter) int64 {
	missing := float64(c.Capacity()) - ct.tokens
	if missing <= 0 {
		return 0
	}
	return int64(math.Ceil(missing / rate(c)))
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
		st.RetryAfter = accounting.Micros(int64(math.Ceil((float64(amount) - view.tokens) / rate(c))))
	}
	return st
}
