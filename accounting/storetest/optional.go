package storetest

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// optional is an optional item: a shadow limit's.
func optional(c accounting.Counter, amount int64) accounting.ReserveItem {
	return accounting.ReserveItem{Counter: c, Amount: amount, Optional: true}
}

// testOptional pins what a shadow limit's item does in a reservation: it
// is charged when it fits, never vetoes, says why when it does not fit,
// and is charged nothing when another item rejects the reservation.
func testOptional(t *testing.T, h Harness) {
	enforced := counter("opt-enforced", accounting.FixedWindow, 100, 10*time.Second)
	shadow := counter("opt-shadow", accounting.FixedWindow, 30, 10*time.Second)
	bucketLimit := accounting.Limit{Name: "opt-bucket", Algorithm: accounting.TokenBucket, Limit: 100, Window: 10 * time.Second, Burst: 20}
	bucket := bucketLimit.Counter(nil)
	untouched := counter("opt-untouched", accounting.SlidingWindow, 100, 10*time.Second)
	alignTo(h, 10*time.Second, time.Second)
	mustAdmit(t, h, shadow, 20)

	// The shadow counter has 10 left and the bucket 20: neither fits, and
	// neither vetoes.
	res, _ := reserve(t, h, item(enforced, 50), optional(shadow, 15), optional(bucket, 30))
	if !res.Admitted {
		t.Fatalf("rejected by optional items that do not fit; states %+v", res.States)
	}
	if !res.States[0].Fits {
		t.Errorf("enforced item: Fits false, want true")
	}
	assertRemaining(t, res.States[0], 50)
	st := res.States[1]
	if st.Fits || st.NeverFits {
		t.Errorf("optional item over its limit: Fits %v, NeverFits %v, want false, false", st.Fits, st.NeverFits)
	}
	assertRemaining(t, st, 10)
	assertDuration(t, h, "optional retry-after", st.RetryAfter, 9*time.Second)
	if st := res.States[2]; st.Fits || !st.NeverFits {
		t.Errorf("optional item over its burst: Fits %v, NeverFits %v, want false, true", st.Fits, st.NeverFits)
	}

	// Neither was charged; an optional item that fits is.
	res, _ = reserve(t, h, item(enforced, 10), optional(shadow, 10), optional(bucket, 20))
	if !res.Admitted || !res.States[1].Fits || !res.States[2].Fits {
		t.Fatalf("optional items that fit: admitted %v, states %+v; want admitted, both fitting", res.Admitted, res.States)
	}
	assertRemaining(t, res.States[1], 0)
	assertRemaining(t, res.States[2], 0)
	assertRemaining(t, mustReject(t, h, shadow, 1), 0)

	// Only optional items: admitted whatever they say.
	res, _ = reserve(t, h, optional(shadow, 5))
	if !res.Admitted || res.States[0].Fits {
		t.Errorf("a lone optional item over its limit: admitted %v, fits %v; want admitted, not fitting", res.Admitted, res.States[0].Fits)
	}

	// A reservation the enforced item rejects charges no optional item.
	res, _ = reserve(t, h, item(enforced, 41), optional(untouched, 30))
	if res.Admitted {
		t.Fatalf("admitted over the enforced item's limit")
	}
	if !res.States[1].Fits {
		t.Errorf("optional item with room in a rejected reservation: Fits false, want true")
	}
	assertRemaining(t, mustAdmit(t, h, untouched, 100), 0)
}

// testOptionalReleaseAndSettle checks that releasing a reservation
// refunds the optional items it charged and none of those it did not,
// and that a charged optional item settles like any other.
func testOptionalReleaseAndSettle(t *testing.T, h Harness) {
	for _, alg := range []accounting.Algorithm{accounting.FixedWindow, accounting.SlidingWindow, accounting.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			enforced := counter("optrel-enforced-"+alg.String(), alg, 100, time.Hour)
			charged := counter("optrel-charged-"+alg.String(), alg, 100, time.Hour)
			full := counter("optrel-full-"+alg.String(), alg, 100, time.Hour)
			mustAdmit(t, h, full, 90)

			res, req := reserve(t, h, item(enforced, 40), optional(charged, 40), optional(full, 40))
			if !res.Admitted || !res.States[1].Fits || res.States[2].Fits {
				t.Fatalf("got admitted %v, states %+v; want admitted, the second item charged, the third not", res.Admitted, res.States)
			}
			release(t, h, req, true)
			// The charged items are back to full; the skipped one keeps
			// its 10, not 50.
			assertRemaining(t, mustAdmit(t, h, enforced, 100), 0)
			assertRemaining(t, mustAdmit(t, h, charged, 100), 0)
			assertRemaining(t, mustReject(t, h, full, 11), 10)

			settled := counter("optset-"+alg.String(), alg, 100, time.Hour)
			res, req = reserve(t, h, optional(settled, 80))
			if !res.Admitted || !res.States[0].Fits {
				t.Fatalf("an optional item that fits: admitted %v, states %+v", res.Admitted, res.States)
			}
			settle(t, h, req, res, 30)
			assertRemaining(t, mustAdmit(t, h, settled, 70), 0)
		})
	}
}
