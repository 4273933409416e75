package storetest

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// Optional items of the kinds that are more than a counter: a
// concurrent limit's lease and a lifetime budget's run. A store keeps
// them apart from the windows (a lease per reservation, a run's start),
// so an optional one must be left alone as wholly as a window is when it
// does not fit, and a reservation that mixes them must still answer for
// each item.

// settleCharged is the settlement a Limiter sends: the items the
// reservation charged, each with its actual amount (actual[i] for item i;
// the optional items res says were not charged left out).
func settleCharged(req accounting.ReserveRequest, res accounting.ReserveResult, actual ...int64) accounting.SettleRequest {
	sr := accounting.SettleRequest{ID: req.ID}
	for i, it := range req.Items {
		if it.Optional && !res.States[i].Fits {
			continue
		}
		sr.Items = append(sr.Items, accounting.SettleItem{
			Counter: it.Counter, Reserved: it.Amount, Actual: actual[i], Mark: res.States[i].Mark,
		})
	}
	return sr
}

func mustSettle(t *testing.T, h Harness, sr accounting.SettleRequest) {
	t.Helper()
	if err := h.Store.Settle(t.Context(), sr); err != nil {
		t.Fatalf("Settle: %v", err)
	}
}

// testOptionalLease: an optional lease (a shadow concurrent limit) is
// taken only when one is free and never vetoes; one that was not taken
// is not given back by its reservation's release or settlement (which
// would free another request's slot); one that was taken goes back at
// settlement, or at release.
func testOptionalLease(t *testing.T, h Harness) {
	enforced := counter("optlease-rpm", accounting.FixedWindow, 100, time.Hour)
	c := leaseCounter("optlease", 1, time.Minute)

	resA, reqA := reserve(t, h, item(enforced, 1), optional(c, 1))
	if !resA.Admitted || !resA.States[1].Fits {
		t.Fatalf("a free slot: got admitted %v, states %+v; want admitted, the lease taken", resA.Admitted, resA.States)
	}
	assertRemaining(t, resA.States[1], 0)

	resB, reqB := reserve(t, h, item(enforced, 1), optional(c, 1))
	if !resB.Admitted {
		t.Fatalf("rejected by an optional lease: %+v", resB.States)
	}
	st := resB.States[1]
	if st.Fits || st.NeverFits || st.RetryAfter != accounting.ConcurrentRetryAfter {
		t.Errorf("no slot free: got fits %v, never fits %v, retry after %v; want false, false, %v",
			st.Fits, st.NeverFits, st.RetryAfter, accounting.ConcurrentRetryAfter)
	}
	assertRemaining(t, st, 0)
	assertRemaining(t, resB.States[0], 98)
	// B took no lease: settling it frees nothing, and A still holds the
	// only slot.
	mustSettle(t, h, settleCharged(reqB, resB, 1, 1))
	mustReject(t, h, c, 1)

	resC, reqC := reserve(t, h, optional(c, 1))
	if !resC.Admitted || resC.States[0].Fits {
		t.Fatalf("a lone optional lease, no slot free: got admitted %v, fits %v; want admitted, not taken", resC.Admitted, resC.States[0].Fits)
	}
	release(t, h, reqC, true)
	mustReject(t, h, c, 1)

	// A's lease goes back at its settlement, whatever the amounts.
	mustSettle(t, h, settleCharged(reqA, resA, 1, 0))
	resD, reqD := reserve(t, h, optional(c, 1))
	if !resD.Admitted || !resD.States[0].Fits {
		t.Fatalf("after A settled: got admitted %v, fits %v; want the lease taken", resD.Admitted, resD.States[0].Fits)
	}
	// And a taken one at its release.
	release(t, h, reqD, true)
	mustAdmit(t, h, c, 1)
}

// testOptionalLifetime: an optional lifetime item (a shadow run budget)
// never vetoes, neither when the budget is spent nor when the run's time
// is up; one left uncharged neither starts the run nor is refunded by a
// release; and in a reservation beside an enforced run budget each item
// reports its own run.
func testOptionalLifetime(t *testing.T, h Harness) {
	steps := lifetimeCounter("optrun-steps", 10, 2*time.Hour)
	run := lifetimeCounter("optrun-shadow", 3, time.Hour)

	res1, req1 := reserve(t, h, item(steps, 1), optional(run, 2))
	if !res1.Admitted || !res1.States[1].Fits {
		t.Fatalf("first step: got admitted %v, states %+v; want admitted, both charged", res1.Admitted, res1.States)
	}
	assertRemaining(t, res1.States[0], 9)
	assertRemaining(t, res1.States[1], 1)
	assertDuration(t, h, "shadow run's reset", res1.States[1].Reset, time.Hour)
	start, shadowStart := res1.States[0].Mark, res1.States[1].Mark
	// One decision starts both runs: at one instant, or on a store that
	// decides in steps (a sharded Redis Cluster, the two counters on two
	// masters) as far apart as its clock runs during a call.
	assertDuration(t, h, "runs started by one reservation: the second's start after the first's",
		time.Duration(shadowStart-start)*time.Microsecond, 0)

	h.Advance(time.Minute)
	// 2 more is over the shadow budget (1 left): admitted, not charged
	// there, and the enforced run's state is still its own.
	res2, req2 := reserve(t, h, item(steps, 1), optional(run, 2))
	if !res2.Admitted {
		t.Fatalf("rejected by an optional run budget: %+v", res2.States)
	}
	if st := res2.States[1]; st.Fits || st.NeverFits || st.Expired || st.RetryAfter != 0 {
		t.Errorf("over the shadow budget: got fits %v, never fits %v, expired %v, retry after %v; want false, false, false, 0",
			st.Fits, st.NeverFits, st.Expired, st.RetryAfter)
	}
	assertRemaining(t, res2.States[1], 1)
	if st := res2.States[0]; !st.Fits || st.Mark != start {
		t.Errorf("the enforced run beside it: got fits %v, mark %d; want true, %d", st.Fits, st.Mark, start)
	}
	assertRemaining(t, res2.States[0], 8)
	assertDuration(t, h, "enforced run's reset", res2.States[0].Reset, 2*time.Hour-time.Minute)
	release(t, h, req2, true)

	// A step larger than a budget whose run has not started: never fits,
	// and does not start it.
	fresh := lifetimeCounter("optrun-fresh", 3, time.Hour)
	res3, _ := reserve(t, h, item(steps, 1), optional(fresh, 4))
	if !res3.Admitted || res3.States[1].Fits || !res3.States[1].NeverFits {
		t.Fatalf("4 on a fresh budget of 3: got admitted %v, states %+v; want admitted, never fits", res3.Admitted, res3.States)
	}
	if res3.States[0].Mark != start {
		t.Errorf("the enforced run beside a fresh one: got mark %d, want %d", res3.States[0].Mark, start)
	}
	h.Advance(50 * time.Minute)
	assertDuration(t, h, "a fresh run's reset, its first step 50m after the refused one",
		mustAdmit(t, h, fresh, 1).Reset, time.Hour)

	// The first reservation settles on both runs (the shadow one 2 → 1).
	mustSettle(t, h, settleCharged(req1, res1, 1, 1))
	// 1 left: the release of the second refunded nothing on it.
	if st := mustAdmit(t, h, run, 2); st.Mark != shadowStart || st.Remaining != 0 {
		t.Errorf("the shadow run after settling: got mark %d, remaining %d; want %d, 0", st.Mark, st.Remaining, shadowStart)
	}

	// Its time up, the shadow run still vetoes nothing.
	h.Advance(10 * time.Minute)
	res4, _ := reserve(t, h, item(steps, 1), optional(run, 0))
	if !res4.Admitted || res4.States[1].Fits || !res4.States[1].Expired {
		t.Fatalf("past the shadow run's time: got admitted %v, states %+v; want admitted, expired", res4.Admitted, res4.States)
	}
	// Steps: the first, the third and this one (the second was released).
	assertRemaining(t, res4.States[0], 7)
}

// testMixedKinds reserves, in one call, a calendar day in a time zone, a
// lease, a run budget and a sliding window, then the same enforced
// beside an optional item of each kind that does not fit: every item is
// read as its own kind, and each answers for itself.
func testMixedKinds(t *testing.T, h Harness) {
	tokyo := mustLoad(t, "Asia/Tokyo")
	day := func(name string) accounting.Counter {
		l := accounting.Limit{Name: name, Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarDay,
			Window: 24 * time.Hour, Limit: 100, Location: tokyo}
		return l.Counter(nil)
	}
	zoned, lease, run := day("mixed-day"), leaseCounter("mixed-lease", 2, time.Minute), lifetimeCounter("mixed-run", 5, time.Hour)
	sliding := counter("mixed-sliding", accounting.SlidingWindow, 100, time.Hour)
	end := midnight(h.Now(), tokyo).Add(24 * time.Hour)
	h.Advance(end.Add(-3 * time.Hour).Sub(h.Now()))

	res, req := reserve(t, h, item(zoned, 60), item(lease, 1), item(run, 2), item(sliding, 10))
	if !res.Admitted {
		t.Fatalf("rejected: %+v", res.States)
	}
	for i, want := range []int64{40, 1, 3, 90} {
		assertRemaining(t, res.States[i], want)
	}
	assertDuration(t, h, "the day's reset", res.States[0].Reset, 3*time.Hour)
	assertDuration(t, h, "the run's reset", res.States[2].Reset, time.Hour)

	res2, req2 := reserve(t, h,
		optional(day("mixed-day-2"), 101), item(zoned, 1),
		optional(leaseCounter("mixed-lease-2", 1, time.Minute), 2), item(lease, 1),
		optional(lifetimeCounter("mixed-run-2", 5, time.Hour), 6), item(run, 1),
		optional(counter("mixed-sliding-2", accounting.SlidingWindow, 100, time.Hour), 101), item(sliding, 1))
	if !res2.Admitted {
		t.Fatalf("rejected by optional items: %+v", res2.States)
	}
	for i := 0; i < 8; i += 2 {
		if st := res2.States[i]; st.Fits || !st.NeverFits || !res2.States[i+1].Fits {
			t.Errorf("items %d, %d: got fits %v (never fits %v), fits %v; want false (never fits), true",
				i, i+1, st.Fits, st.NeverFits, res2.States[i+1].Fits)
		}
	}
	for i, want := range []int64{100, 39, 1, 0, 5, 2, 100, 89} {
		if got := res2.States[i].Remaining; got != want {
			t.Errorf("item %d: remaining: got %d, want %d", i, got, want)
		}
	}
	assertDuration(t, h, "an optional day's reset", res2.States[0].Reset, 3*time.Hour)
	assertDuration(t, h, "an optional fresh run's reset", res2.States[4].Reset, time.Hour)
	if got, want := res2.States[5].Mark, res.States[2].Mark; got != want {
		t.Errorf("the enforced run's mark: got %d, want %d", got, want)
	}

	// Releasing the second refunds its enforced items; settling the
	// first returns its lease and books its actual amounts.
	release(t, h, req2, true)
	settle(t, h, req, res, 30, 1, 1, 5)
	for _, c := range []struct {
		c    accounting.Counter
		room int64
	}{{zoned, 70}, {lease, 2}, {run, 4}, {sliding, 95}} {
		assertRemaining(t, mustAdmit(t, h, c.c, c.room), 0)
	}
}
