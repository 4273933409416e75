package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// resetCounter resets c and checks that it held state.
func resetCounter(t *testing.T, in accounting.Inspector, c accounting.Counter) {
	t.Helper()
	existed, err := in.ResetCounter(context.Background(), c)
	if err != nil || !existed {
		t.Fatalf("ResetCounter of a charged counter: got %v, %v, want true, nil", existed, err)
	}
}

// testResetExact: reservations made before a reset, settled or released
// after it, change nothing on the fresh counter, an extra charge no more
// than a refund, and hold nothing in flight on it; those made after it
// settle as usual. (On a store whose clock stands still between calls,
// as memstore's harness does, the reservations made before and after
// the reset are made in the same instant as it.)
func testResetExact(t *testing.T, h Harness, in accounting.Inspector) {
	for _, c := range inspectCounters(t, "exact") {
		t.Run(name(c), func(t *testing.T) {
			resA, reqA := reserve(t, h, item(c, 60))
			resB, reqB := reserve(t, h, item(c, 10))
			_, reqC := reserve(t, h, item(c, 20))
			if !resA.Admitted || !resB.Admitted {
				t.Fatal("rejected before the reset")
			}
			resetCounter(t, in, c)
			resD, reqD := reserve(t, h, item(c, 30))
			assertStateInFlight(t, "admitted after the reset", resD.States[0], 30)
			assertRemaining(t, resD.States[0], 70)
			settle(t, h, reqA, resA, 0)
			assertInFlight(t, h, "a refund from before the reset", c, 30, 70)
			settle(t, h, reqB, resB, 90)
			assertInFlight(t, h, "an extra charge from before the reset", c, 30, 70)
			release(t, h, reqC, true)
			assertInFlight(t, h, "a release from before the reset", c, 30, 70)
			_, reqE := reserve(t, h, item(c, 5))
			release(t, h, reqE, true)
			assertInFlight(t, h, "released after the reset", c, 30, 70)
			settle(t, h, reqD, resD, 5)
			assertInFlight(t, h, "settled after the reset", c, 0, 95)
		})
	}
}

// testResetExactLeases: a lease taken before a reset is gone with it; its
// settlement returns none of those taken after.
func testResetExactLeases(t *testing.T, h Harness, in accounting.Inspector) {
	c := leaseCounter("exact-leases", 3, time.Minute)
	resA, reqA := reserve(t, h, item(c, 1))
	_, reqB := reserve(t, h, item(c, 1))
	resetCounter(t, in, c)
	mustAdmit(t, h, c, 1)
	settle(t, h, reqA, resA, 0)
	release(t, h, reqB, true)
	assertInFlight(t, h, "the lease taken after the reset", c, 1, 2)
}

// testResetExactRun: a reset starts a new run, on which the old run's
// settlements change nothing.
func testResetExactRun(t *testing.T, h Harness, in accounting.Inspector) {
	c := lifetimeCounter("exact-run", 100, time.Hour)
	resA, reqA := reserve(t, h, item(c, 60))
	_, reqB := reserve(t, h, item(c, 10))
	resetCounter(t, in, c)
	resC, reqC := reserve(t, h, item(c, 30))
	assertRemaining(t, resC.States[0], 70)
	settle(t, h, reqA, resA, 100)
	release(t, h, reqB, true)
	assertInFlight(t, h, "the old run's settlement and release", c, 30, 70)
	settle(t, h, reqC, resC, 40)
	assertInFlight(t, h, "the new run's settlement", c, 0, 60)
}

// testResetExactHold: a hold made before a reset changes nothing on the
// fresh counter when it is settled, days later; one made after it
// settles as usual. Stores that keep no holds skip it.
func testResetExactHold(t *testing.T, h Harness, in accounting.Inspector) {
	hs, ok := h.Store.(accounting.Holder)
	if !ok {
		t.Skipf("%T keeps no holds", h.Store)
	}
	c := counter("exact-hold", accounting.FixedWindow, 100, holdWeek)
	alignTo(h, holdWeek, time.Hour)
	before := heldReservation(t, h, hs, newID(), 2*24*time.Hour, "", 60, 0, c)
	resetCounter(t, in, c)
	after := heldReservation(t, h, hs, newID(), 2*24*time.Hour, "", 30, 10, c)
	h.Advance(accounting.RecordTTL + time.Hour)
	for _, sr := range []accounting.SettleRequest{before, after} {
		if _, err := hs.TakeHold(context.Background(), sr.ID); err != nil {
			t.Fatalf("TakeHold: %v", err)
		}
		if err := h.Store.Settle(context.Background(), sr); err != nil {
			t.Fatalf("settling the hold: %v", err)
		}
	}
	// Only the hold made after the reset refunds (20 of its 30).
	assertRemaining(t, mustReject(t, h, c, 91), 90)
}
