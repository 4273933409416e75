package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// testSettleTwiceOnOneCounter: a settlement may name a counter twice,
// the second time as a charge of its own (nothing reserved) at another
// mark: a provider's block, booked in an older slot of a sliding window
// so that it leaves sooner than the reservation's charge. Each lands
// where its mark says, as two settlements would.
func testSettleTwiceOnOneCounter(t *testing.T, h Harness) {
	t.Run("sliding", func(t *testing.T) {
		c := counter("twice-sliding", accounting.SlidingWindow, 100, 10*time.Second)
		alignTo(h, 10*time.Second, 100*time.Millisecond)
		res, req := reserve(t, h, item(c, 10))
		m := res.States[0].Mark
		h.Advance(5 * time.Second)
		sr := settleRequest(req, res, 20)
		// Two slots after the reservation's, three before the current.
		sr.Items = append(sr.Items, accounting.SettleItem{Counter: c, Actual: 50, Mark: m + 2})
		if err := h.Store.Settle(context.Background(), sr); err != nil {
			t.Fatalf("Settle: %v", err)
		}
		assertRemaining(t, peekRemaining(t, h, c), 30)
		// Slot m leaves the count 10.9s after the reservation, slot m+2
		// 12.9s after it.
		h.Advance(6 * time.Second) // 11.1s after the reservation
		assertRemaining(t, peekRemaining(t, h, c), 50)
		h.Advance(2 * time.Second) // 13.1s
		assertRemaining(t, peekRemaining(t, h, c), 100)
	})
	t.Run("fixed", func(t *testing.T) {
		c := counter("twice-fixed", accounting.FixedWindow, 100, 10*time.Second)
		alignTo(h, 10*time.Second, time.Second)
		res, req := reserve(t, h, item(c, 10))
		h.Advance(5 * time.Second)
		sr := settleRequest(req, res, 20)
		sr.Items = append(sr.Items, accounting.SettleItem{Counter: c, Actual: 50, Mark: res.States[0].Mark})
		if err := h.Store.Settle(context.Background(), sr); err != nil {
			t.Fatalf("Settle: %v", err)
		}
		assertRemaining(t, peekRemaining(t, h, c), 30)
		h.Advance(5 * time.Second)
		assertRemaining(t, peekRemaining(t, h, c), 100)
	})
}

// peekRemaining returns c's state as a reservation of nothing sees it.
func peekRemaining(t *testing.T, h Harness, c accounting.Counter) accounting.CounterState {
	t.Helper()
	res, _ := reserve(t, h, item(c, 0))
	return res.States[0]
}
