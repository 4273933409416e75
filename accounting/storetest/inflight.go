package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// inFlightTests are the cases for accounting.CounterState.InFlight, run by
// [Run]: for each algorithm, what reservations in flight hold, exact
// through settlement, release, the records' expiry and the window
// moving on.
var inFlightTests = []struct {
	name string
	fn   func(t *testing.T, h Harness)
}{
	{"InFlightFixedWindow", testInFlightFixed},
	{"InFlightSlidingWindow", testInFlightSliding},
	{"InFlightSlidingWindowGrains", testInFlightSlidingGrains},
	{"InFlightTokenBucket", testInFlightBucket},
	{"InFlightLeases", testInFlightLeases},
	{"InFlightLifetime", testInFlightLifetime},
	{"InFlightOfARefusal", testInFlightRefusal},
}

// inFlight returns what c's counter holds in flight and has left, as a
// refused reservation larger than its capacity reports them (which
// charges nothing).
func inFlight(t *testing.T, h Harness, c accounting.Counter) (held, remaining int64) {
	t.Helper()
	st := mustReject(t, h, c, c.Capacity()+1)
	return st.InFlight, st.Remaining
}

func assertInFlight(t *testing.T, h Harness, step string, c accounting.Counter, want, wantRemaining int64) {
	t.Helper()
	got, rem := inFlight(t, h, c)
	if got != want || rem != wantRemaining {
		t.Errorf("%s: got in flight %d, remaining %d; want %d, %d", step, got, rem, want, wantRemaining)
	}
}

func assertStateInFlight(t *testing.T, step string, st accounting.CounterState, want int64) {
	t.Helper()
	if st.InFlight != want {
		t.Errorf("%s: got in flight %d, want %d (state %+v)", step, st.InFlight, want, st)
	}
}

// alignToGrain advances the store's clock to offset past the start of
// the next record grain and returns when a record written then expires.
func alignToGrain(h Harness, offset time.Duration) time.Time {
	start := alignTo(h, accounting.RecordGrain, offset)
	return time.UnixMicro(accounting.RecordExpiry(start.Add(offset).UnixMicro()))
}

// testInFlightFixed: in a day's window (longer than a record lasts), the
// reservations' amounts are in flight until each settles or is released
// (a settlement equal to its estimate included), or until its record
// expires, when its estimate stays charged but no longer in flight; a
// new window holds nothing of the last one's, and a late settlement's
// extra charge is usage, not in flight.
func testInFlightFixed(t *testing.T, h Harness) {
	c := counter("inflight-fixed", accounting.FixedWindow, 1000, 24*time.Hour)
	alignTo(h, 24*time.Hour, time.Hour)
	expiry := alignToGrain(h, time.Minute)

	resA, reqA := reserve(t, h, item(c, 100))
	assertStateInFlight(t, "first admitted", resA.States[0], 100)
	resB, reqB := reserve(t, h, item(c, 200))
	assertStateInFlight(t, "second admitted", resB.States[0], 300)
	resC, reqC := reserve(t, h, item(c, 50))
	assertStateInFlight(t, "third admitted", resC.States[0], 350)
	assertInFlight(t, h, "three in flight", c, 350, 650)

	settle(t, h, reqA, resA, 40)
	assertInFlight(t, h, "one settled", c, 250, 710)
	settle(t, h, reqC, resC, 50)
	assertInFlight(t, h, "one settled at its estimate", c, 200, 710)
	release(t, h, reqB, true)
	assertInFlight(t, h, "one released", c, 0, 910)

	// A record that expires: its estimate stays charged.
	h.Advance(time.Minute)
	_, reqD := reserve(t, h, item(c, 70))
	h.Advance(expiry.Sub(h.Now()) - time.Second)
	assertInFlight(t, h, "just before the record expires", c, 70, 840)
	h.Advance(2 * time.Second)
	assertInFlight(t, h, "after the record expired", c, 0, 840)
	release(t, h, reqD, false)

	// The window moves on.
	short := counter("inflight-fixed-short", accounting.FixedWindow, 1000, 10*time.Minute)
	alignTo(h, 10*time.Minute, time.Minute)
	resE, reqE := reserve(t, h, item(short, 30))
	assertStateInFlight(t, "admitted", resE.States[0], 30)
	h.Advance(10 * time.Minute)
	assertInFlight(t, h, "in the next window", short, 0, 1000)
	settle(t, h, reqE, resE, 90)
	assertInFlight(t, h, "an extra charge from the last window", short, 0, 940)
}

// testInFlightSliding: a reservation is in flight while its slot counts;
// once the slot leaves the window, its settlement changes nothing.
func testInFlightSliding(t *testing.T, h Harness) {
	c := counter("inflight-sliding", accounting.SlidingWindow, 100, 10*time.Second)
	alignTo(h, time.Second, 100*time.Millisecond)
	resA, reqA := reserve(t, h, item(c, 30))
	assertStateInFlight(t, "admitted", resA.States[0], 30)
	h.Advance(3 * time.Second)
	resB, reqB := reserve(t, h, item(c, 20))
	assertStateInFlight(t, "admitted in a later slot", resB.States[0], 50)
	settle(t, h, reqB, resB, 5)
	assertInFlight(t, h, "one settled", c, 30, 65)
	h.Advance(8 * time.Second) // the first slot leaves the window
	assertInFlight(t, h, "its slot gone", c, 0, 95)
	settle(t, h, reqA, resA, 0)
	assertInFlight(t, h, "settled after its slot left", c, 0, 95)
}

// testInFlightSlidingGrains: in a sliding window longer than a record
// lasts, a slot outlives the records of its reservations: each one's
// amount leaves what is in flight when its record expires, within the
// slot, while the slot's usage stays.
func testInFlightSlidingGrains(t *testing.T, h Harness) {
	// Slots of 12 minutes, two record grains each.
	c := counter("inflight-sliding-long", accounting.SlidingWindow, 1000, 2*time.Hour)
	alignTo(h, 12*time.Minute, time.Minute)
	first := accounting.RecordExpiry(h.Now().UnixMicro())
	mustAdmit(t, h, c, 100)
	h.Advance(7 * time.Minute) // the slot's second grain
	resB, reqB := reserve(t, h, item(c, 40))
	assertStateInFlight(t, "two in flight", resB.States[0], 140)
	h.Advance(time.UnixMicro(first).Sub(h.Now()) - time.Second)
	assertInFlight(t, h, "before the first record expires", c, 140, 860)
	h.Advance(2 * time.Second)
	assertInFlight(t, h, "after the first record expired", c, 40, 860)
	settle(t, h, reqB, resB, 10)
	assertInFlight(t, h, "the second settled", c, 0, 890)
}

// testInFlightBucket: a bucket's reservations in flight count up to what
// the bucket lacks of full; they stay exact through the bucket filling
// up again, and end with their records.
func testInFlightBucket(t *testing.T, h Harness) {
	// One back a second.
	c := counter("inflight-bucket", accounting.TokenBucket, 100, 100*time.Second)
	resA, reqA := reserve(t, h, item(c, 60))
	assertStateInFlight(t, "admitted", resA.States[0], 60)
	h.Advance(30 * time.Second)
	assertInFlight(t, h, "after a refill", c, 30, 70)
	h.Advance(70 * time.Second) // full again
	assertInFlight(t, h, "full again", c, 0, 100)
	resB, reqB := reserve(t, h, item(c, 10))
	assertStateInFlight(t, "admitted on a full bucket", resB.States[0], 10)
	settle(t, h, reqA, resA, 60)
	assertInFlight(t, h, "the first settled", c, 10, 90)
	settle(t, h, reqB, resB, 0)
	assertInFlight(t, h, "the second refunded", c, 0, 100)

	// A slow bucket: a record expires long before it is full again.
	slow := counter("inflight-bucket-slow", accounting.TokenBucket, 100, 30*24*time.Hour)
	expiry := alignToGrain(h, time.Minute)
	resC, reqC := reserve(t, h, item(slow, 50))
	assertStateInFlight(t, "admitted", resC.States[0], 50)
	h.Advance(expiry.Sub(h.Now()) - time.Second)
	if got, _ := inFlight(t, h, slow); got != 50 {
		t.Errorf("before the record expires: got in flight %d, want 50", got)
	}
	h.Advance(2 * time.Second)
	if got, _ := inFlight(t, h, slow); got != 0 {
		t.Errorf("after the record expired: got in flight %d, want 0", got)
	}
	if err := h.Store.Settle(context.Background(), settleRequest(reqC, resC, 0)); !errors.Is(err, accounting.ErrNoReservation) {
		t.Errorf("settling after the record expired: got %v, want ErrNoReservation", err)
	}
}

// testInFlightLeases: every lease is in flight.
func testInFlightLeases(t *testing.T, h Harness) {
	c := leaseCounter("inflight-leases", 3, time.Minute)
	resA, reqA := reserve(t, h, item(c, 1))
	assertStateInFlight(t, "one lease", resA.States[0], 1)
	resB, reqB := reserve(t, h, item(c, 1))
	assertStateInFlight(t, "two leases", resB.States[0], 2)
	assertInFlight(t, h, "two leases", c, 2, 1)
	settle(t, h, reqA, resA, 0)
	assertInFlight(t, h, "one returned", c, 1, 2)
	release(t, h, reqB, true)
	assertInFlight(t, h, "both returned", c, 0, 3)
}

// testInFlightLifetime: a run's reservations are in flight until they
// settle, are released, or their records expire; a new run holds none
// of the last one's.
func testInFlightLifetime(t *testing.T, h Harness) {
	c := lifetimeCounter("inflight-run", 1000, 3*time.Hour)
	expiry := alignToGrain(h, time.Minute)
	resA, reqA := reserve(t, h, item(c, 100))
	assertStateInFlight(t, "admitted", resA.States[0], 100)
	resB, reqB := reserve(t, h, item(c, 50))
	assertStateInFlight(t, "admitted", resB.States[0], 150)
	settle(t, h, reqA, resA, 30)
	assertInFlight(t, h, "one settled", c, 50, 920)
	release(t, h, reqB, true)
	assertInFlight(t, h, "one released", c, 0, 970)
	mustAdmit(t, h, c, 20)
	h.Advance(expiry.Sub(h.Now()) - time.Second)
	assertInFlight(t, h, "before the record expires", c, 20, 950)
	h.Advance(2 * time.Second)
	assertInFlight(t, h, "after the record expired", c, 0, 950)
}

// testInFlightRefusal: the item that refuses a reservation reports what
// was in flight before it, and so does an optional item left uncharged.
// (A store that decides in steps may not have asked about the other
// items; see redisstore's sharded layout.)
func testInFlightRefusal(t *testing.T, h Harness) {
	big := counter("inflight-refusal-big", accounting.FixedWindow, 1000, time.Hour)
	small := counter("inflight-refusal-small", accounting.SlidingWindow, 100, time.Hour)
	mustAdmit(t, h, big, 100)
	mustAdmit(t, h, small, 80)
	res, _ := reserve(t, h, item(big, 10), item(small, 30))
	if res.Admitted {
		t.Fatal("admitted over the limit")
	}
	assertStateInFlight(t, "the item that did not fit", res.States[1], 80)

	shadow := item(small, 30)
	shadow.Optional = true
	res, _ = reserve(t, h, item(big, 10), shadow)
	if !res.Admitted || res.States[1].Fits {
		t.Fatalf("got admitted %v, optional fits %v; want true, false", res.Admitted, res.States[1].Fits)
	}
	assertStateInFlight(t, "the item charged", res.States[0], 110)
	assertStateInFlight(t, "the optional item left uncharged", res.States[1], 80)
}
