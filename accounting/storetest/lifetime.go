package storetest

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// lifetimeTests are the cases for lifetime budgets, run by [Run].
var lifetimeTests = []struct {
	name string
	fn   func(t *testing.T, h Harness)
}{
	{"Lifetime", testLifetime},
	{"LifetimeWallClock", testLifetimeWallClock},
	{"LifetimeStartsAtFirstAdmission", testLifetimeStartsAtFirstAdmission},
	{"LifetimeSettleAndRelease", testLifetimeSettleAndRelease},
	{"LifetimeExpiry", testLifetimeExpiry},
}

func lifetimeCounter(name string, limit int64, maxDuration time.Duration) accounting.Counter {
	l := accounting.Limit{Name: name, Algorithm: accounting.Lifetime, Limit: limit, Window: maxDuration}
	return l.Counter(nil)
}

// testLifetime: a budget of 5 admits 5 and refuses the 6th for good (no
// retry time, however long one waits within the run), and a request
// larger than the budget never fits.
func testLifetime(t *testing.T, h Harness) {
	c := lifetimeCounter("run-steps", 5, time.Hour)
	for i := range 5 {
		st := mustAdmit(t, h, c, 1)
		assertRemaining(t, st, int64(4-i))
		assertDuration(t, h, "reset", st.Reset, time.Hour)
	}
	st := mustReject(t, h, c, 1)
	assertRemaining(t, st, 0)
	if st.RetryAfter != 0 || st.NeverFits || st.Expired {
		t.Errorf("refusal: got retry after %v, never fits %v, expired %v; want 0, false, false", st.RetryAfter, st.NeverFits, st.Expired)
	}
	h.Advance(30 * time.Minute)
	st = mustReject(t, h, c, 1)
	assertDuration(t, h, "reset", st.Reset, 30*time.Minute)
	if st := mustReject(t, h, lifetimeCounter("run-big", 5, time.Hour), 6); !st.NeverFits {
		t.Errorf("6 on a budget of 5: got never fits false, want true")
	}
}

// testLifetimeWallClock: the run admits until its max duration has
// passed since its first request, on the store's clock, and from then on
// refuses everything as expired.
func testLifetimeWallClock(t *testing.T, h Harness) {
	const maxDuration = 10 * time.Minute
	c := lifetimeCounter("run-clock", 100, maxDuration)
	mustAdmit(t, h, c, 1)
	h.Advance(maxDuration - time.Second)
	assertDuration(t, h, "reset", mustAdmit(t, h, c, 1).Reset, time.Second)
	h.Advance(time.Second)
	st := mustReject(t, h, c, 1)
	if !st.Expired || st.RetryAfter != 0 {
		t.Errorf("past the cap: got expired %v, retry after %v; want true, 0", st.Expired, st.RetryAfter)
	}
	assertRemaining(t, st, 98)
	// Zero still reports the state, expired.
	if res, _ := reserve(t, h, item(c, 0)); res.Admitted || !res.States[0].Expired {
		t.Errorf("zero past the cap: got admitted %v, expired %v; want false, true", res.Admitted, res.States[0].Expired)
	}
}

// testLifetimeStartsAtFirstAdmission: a refused request does not start
// the run; the first admitted one does.
func testLifetimeStartsAtFirstAdmission(t *testing.T, h Harness) {
	const maxDuration = 10 * time.Minute
	c := lifetimeCounter("run-start", 5, maxDuration)
	mustReject(t, h, c, 6)
	h.Advance(maxDuration)
	mustAdmit(t, h, c, 1)
	h.Advance(maxDuration - time.Second)
	mustAdmit(t, h, c, 1)
}

// testLifetimeSettleAndRelease: settlements correct the run's charge
// either way; a release refunds it.
func testLifetimeSettleAndRelease(t *testing.T, h Harness) {
	c := lifetimeCounter("run-tokens", 1000, time.Hour)
	res, req := reserve(t, h, item(c, 600))
	if !res.Admitted {
		t.Fatalf("rejected: %+v", res.States[0])
	}
	settle(t, h, req, res, 100)
	assertRemaining(t, mustAdmit(t, h, c, 0), 900)
	res, req = reserve(t, h, item(c, 100))
	settle(t, h, req, res, 1200)
	// In debt: not even a zero fits any more.
	assertRemaining(t, mustReject(t, h, c, 0), -300)

	d := lifetimeCounter("run-release", 1000, time.Hour)
	res, req = reserve(t, h, item(d, 700))
	if !res.Admitted {
		t.Fatalf("rejected: %+v", res.States[0])
	}
	release(t, h, req, true)
	assertRemaining(t, mustAdmit(t, h, d, 0), 1000)
}

// testLifetimeExpiry: the run's counter is kept for its max duration
// plus accounting.LifetimeGrace after its first request, and then
// forgotten: the run id starts afresh.
func testLifetimeExpiry(t *testing.T, h Harness) {
	const maxDuration = 10 * time.Minute
	c := lifetimeCounter("run-expiry", 2, maxDuration)
	mustAdmit(t, h, c, 2)
	ttl, ok := h.TTL(c.Key)
	want := maxDuration + accounting.LifetimeGrace
	if !ok || ttl <= want-time.Second-h.Tolerance || ttl > want+time.Second+h.Tolerance {
		t.Errorf("ttl: got %v (exists %v), want about %v", ttl, ok, want)
	}
	h.Advance(want - time.Second)
	if st := mustReject(t, h, c, 1); !st.Expired {
		t.Errorf("a second before it is forgotten: got expired false, want true")
	}
	h.Advance(time.Second)
	assertRemaining(t, mustAdmit(t, h, c, 1), 1)
}
