package storetest

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// withLimit returns c with another value, as a limit whose value comes
// from each request (accounting.LimitFrom) asks for it: the same key, a
// different capacity.
func withLimit(c accounting.Counter, limit int64) accounting.Counter {
	c.Limit = limit
	return c
}

// testPerRequestLimit pins that a counter's state is kept apart from its
// limit: each call is checked against the limit it carries, on what the
// counter holds, whatever limit earlier calls carried. A value that rises
// mid-window grants the difference, not a fresh window; one that falls
// below what is used refuses until enough frees up.
func testPerRequestLimit(t *testing.T, h Harness) {
	t.Run("FixedWindow", func(t *testing.T) {
		c := counter("per-request-fixed", accounting.FixedWindow, 100, 10*time.Second)
		alignTo(h, 10*time.Second, time.Second)
		assertRemaining(t, mustAdmit(t, h, c, 60), 40)
		st := mustReject(t, h, withLimit(c, 50), 1)
		assertRemaining(t, st, -10)
		if st.NeverFits {
			t.Errorf("NeverFits for an amount within the lower limit")
		}
		assertRemaining(t, mustAdmit(t, h, withLimit(c, 200), 100), 40)
		assertRemaining(t, mustReject(t, h, withLimit(c, 150), 1), -10)
	})
	t.Run("SlidingWindow", func(t *testing.T) {
		c := counter("per-request-sliding", accounting.SlidingWindow, 100, 10*time.Second)
		alignTo(h, time.Second, 100*time.Millisecond)
		assertRemaining(t, mustAdmit(t, h, c, 60), 40)
		assertRemaining(t, mustReject(t, h, withLimit(c, 50), 1), -10)
		assertRemaining(t, mustAdmit(t, h, withLimit(c, 200), 100), 40)
		st := mustReject(t, h, withLimit(c, 150), 51)
		assertRemaining(t, st, -10)
		// Both charges sit in one slot: it leaves 11 slots after it began.
		assertDuration(t, h, "retry-after", st.RetryAfter, 11*time.Second-100*time.Millisecond)
	})
	t.Run("TokenBucket", func(t *testing.T) {
		// Refill per window and capacity both follow the request's value.
		c := counter("per-request-bucket", accounting.TokenBucket, 100, 10*time.Second)
		assertRemaining(t, mustAdmit(t, h, c, 60), 40)
		// Larger: refills 100 a second now, up to 1000.
		h.Advance(time.Second)
		assertRemaining(t, mustAdmit(t, h, withLimit(c, 1000), 140), 0)
		// Smaller: refills 5 a second, up to 50; a second later it
		// holds 5, and 10 more frees in one more second.
		h.Advance(time.Second)
		st := mustReject(t, h, withLimit(c, 50), 10)
		assertRemaining(t, st, 5)
		assertDuration(t, h, "retry-after", st.RetryAfter, time.Second)
		if st.NeverFits {
			t.Errorf("NeverFits for an amount within the smaller capacity")
		}
		if st := mustReject(t, h, withLimit(c, 50), 51); !st.NeverFits {
			t.Errorf("NeverFits for more than the smaller capacity: got false, want true")
		}
	})
}
