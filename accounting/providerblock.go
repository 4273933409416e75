package accounting

import "time"

// A provider's 429 blocks a provider limit for a while (see
// [ProviderState]) with a charge on the limit's own counter, booked so
// that the store lets it go again within the block: no key of its own,
// and nothing more on any reservation.
//
// Where a charge goes is decided by the store's clock, which the Limiter
// does not read; it knows when the store answered the reservation (the
// counter's mark and reset say so, on the store's clock) and how long ago
// that was on its own clock. The settlement's store call lands after
// that, by at most its own time and the reservation call's: blockSlack
// bounds both. A store that takes longer can book a block late, where it
// lasts as long as a full counter of its algorithm, as a provider's 429
// always did before blocks were bounded.
const blockSlack = time.Second

// providerBlock returns the charge that blocks the counter of item it
// for at most d from its settlement, elapsed after the store answered its
// reservation, and the mark to book it at: left (what the counter has
// after the settlement), or the part of it that is gone within d; 0 when
// the counter's algorithm cannot let a charge go that soon.
//
//   - A sliding window lets a charge go with the slot it is booked in:
//     the block is booked in the oldest slot still counted that leaves
//     within d of the settlement. A block shorter than what is left of
//     the settlement's slot has none.
//   - A fixed window lets it go at the window's end: blocked only if the
//     window ends within d (and has not turned before the settlement).
//   - A token bucket refills what a charge took at the limit's rate: two
//     blocks that meet take twice as long to refill, and the Limiter
//     cannot see the other. A token bucket is not blocked.
//   - A lifetime budget never lets a charge go, and a concurrent limit
//     counts leases: neither is blocked.
//
// Where several blocks meet, each goes with its own slot or window,
// whatever the others charged.
func providerBlock(it *reservedItem, left int64, d, elapsed time.Duration) (amount, mark int64) {
	if left <= 0 || d <= 0 {
		return 0, 0
	}
	c := &it.counter
	e, slack, dd := elapsed.Microseconds(), blockSlack.Microseconds(), d.Microseconds()
	switch c.Algorithm {
	case SlidingWindow:
		slot := SlotLength(c)
		if slot <= 0 {
			return 0, 0
		}
		// When the reservation was booked on the store's clock: within its
		// slot, or exactly where a charge there makes the reset count from.
		lo, hi := it.mark*slot, (it.mark+1)*slot-1
		if it.amount > 0 {
			if t := (it.mark+SlidingSlots+1)*slot - it.reset.Microseconds(); t >= lo && t <= hi {
				lo, hi = t, t
			}
		}
		// The settlement lands in [earliest, latest] on the store's clock.
		earliest, latest := lo+e, hi+e+slack
		// Slot k leaves the count at (k+SlidingSlots+1)*slot: by
		// earliest+d, and never a slot after the current one.
		k := min((earliest+dd)/slot-(SlidingSlots+1), earliest/slot)
		if k < latest/slot-SlidingSlots {
			// Left the window by the settlement: the store would book it
			// on the current slot, for a whole window.
			return 0, 0
		}
		return left, k
	case FixedWindow:
		// The window ends it.reset after the reservation's answer.
		end := it.reset.Microseconds()
		if e+slack >= end || end-e > dd {
			return 0, 0
		}
		return left, it.mark
	}
	return 0, 0
}
