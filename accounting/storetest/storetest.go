// Package storetest is the contract suite every accounting.Store must pass,
// in the spirit of testing/slogtest: a backend's own test calls [Run] with
// a constructor, and the suite pins the algorithms, atomicity, settlement,
// release and expiry so that a limit behaves the same on every store. An
// embedder who writes a Store of their own runs it in that Store's tests.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// Harness is one fresh, empty store under test and the handles the suite
// needs to drive it.
type Harness struct {
	Store accounting.Store
	// Now returns the store's current time.
	Now func() time.Time
	// Advance moves the store's clock forward by d.
	Advance func(d time.Duration)
	// TTL returns how long the store will keep key while it stays idle,
	// and whether the key exists at all.
	TTL func(key string) (time.Duration, bool)
	// Record reports whether the store holds a record (or a release's
	// tombstone) for reservation id that still counts by its clock.
	Record func(id string) bool
	// Tolerance is how far durations the store reports may stray from
	// the exact figure, for stores whose clock keeps running during a
	// test (Redis). Zero means exact.
	Tolerance time.Duration
}

// Run runs the contract suite. newHarness is called once per subtest and
// must return an empty store.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"FixedWindow", testFixedWindow},
		{"FixedWindowNeverFits", testFixedWindowNeverFits},
		{"CalendarMonth", testCalendarMonth},
		{"SlidingWindow", testSlidingWindow},
		{"SlidingWindowNoEdgeBurst", testSlidingWindowNoEdgeBurst},
		{"TokenBucket", testTokenBucket},
		{"AllOrNothing", testAllOrNothing},
		{"Refund", testRefund},
		{"ExtraCharge", testExtraCharge},
		{"SettleIsIdempotent", testSettleIdempotent},
		{"SettleRacesItsRetry", testSettleRace},
		{"SettleWithoutReservation", testSettleWithoutReservation},
		{"Records", testRecords},
		{"RecordExpires", testRecordExpires},
		{"Release", testRelease},
		{"ReleaseBeforeReserve", testReleaseBeforeReserve},
		{"ReleaseAfterRollover", testReleaseAfterRollover},
		{"SettleAfterFixedRollover", testSettleAfterFixedRollover},
		{"SettleAfterSlidingRollover", testSettleAfterSlidingRollover},
		{"SettleTwiceOnOneCounter", testSettleTwiceOnOneCounter},
		{"TokenBucketRefundCapped", testTokenBucketRefundCapped},
		{"PerRequestLimit", testPerRequestLimit},
		{"IdleExpiry", testIdleExpiry},
		{"DistinctKeys", testDistinctKeys},
		{"Concurrent", testConcurrent},
		{"CalendarDayAcrossDST", testCalendarDayAcrossDST},
		{"CalendarMonthInAZone", testCalendarMonthInAZone},
		{"ZonedSettleAndRelease", testZonedSettleAndRelease},
		{"Optional", testOptional},
		{"OptionalReleaseAndSettle", testOptionalReleaseAndSettle},
		{"OptionalLease", testOptionalLease},
		{"OptionalLifetime", testOptionalLifetime},
		{"MixedKinds", testMixedKinds},
	}
	tests = append(tests, leaseTests...)
	tests = append(tests, lifetimeTests...)
	tests = append(tests, inFlightTests...)
	tests = append(tests, struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{"Ping", testPing})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newHarness(t)) })
	}
}

var idSeq atomic.Int64

func newID() string { return fmt.Sprintf("storetest-%d-%d", time.Now().UnixNano(), idSeq.Add(1)) }

func counter(name string, alg accounting.Algorithm, limit int64, window time.Duration) accounting.Counter {
	l := accounting.Limit{Name: name, Algorithm: alg, Limit: limit, Window: window}
	return l.Counter(nil)
}

// reserve reserves amounts on counters and returns the result and the
// request (for settling).
func reserve(t *testing.T, h Harness, items ...accounting.ReserveItem) (accounting.ReserveResult, accounting.ReserveRequest) {
	t.Helper()
	req := accounting.ReserveRequest{ID: newID(), Items: items}
	res, err := h.Store.Reserve(context.Background(), req)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if len(res.States) != len(items) {
		t.Fatalf("Reserve returned %d states for %d items", len(res.States), len(items))
	}
	return res, req
}

func item(c accounting.Counter, amount int64) accounting.ReserveItem {
	return accounting.ReserveItem{Counter: c, Amount: amount}
}

func mustAdmit(t *testing.T, h Harness, c accounting.Counter, amount int64) accounting.CounterState {
	t.Helper()
	res, _ := reserve(t, h, item(c, amount))
	if !res.Admitted {
		t.Fatalf("reserving %d on %s: rejected (state %+v), want admitted", amount, c.Key, res.States[0])
	}
	return res.States[0]
}

func mustReject(t *testing.T, h Harness, c accounting.Counter, amount int64) accounting.CounterState {
	t.Helper()
	res, _ := reserve(t, h, item(c, amount))
	if res.Admitted {
		t.Fatalf("reserving %d on %s: admitted (state %+v), want rejected", amount, c.Key, res.States[0])
	}
	if res.States[0].Fits {
		t.Fatalf("rejected item reports Fits")
	}
	return res.States[0]
}

// settle settles the reservation req with one actual amount per item.
func settle(t *testing.T, h Harness, req accounting.ReserveRequest, res accounting.ReserveResult, actual ...int64) {
	t.Helper()
	if err := h.Store.Settle(context.Background(), settleRequest(req, res, actual...)); err != nil {
		t.Fatalf("Settle: %v", err)
	}
}

func settleRequest(req accounting.ReserveRequest, res accounting.ReserveResult, actual ...int64) accounting.SettleRequest {
	sr := accounting.SettleRequest{ID: req.ID}
	for i, it := range req.Items {
		sr.Items = append(sr.Items, accounting.SettleItem{
			Counter: it.Counter, Reserved: it.Amount, Actual: actual[i], Mark: res.States[i].Mark, Epoch: res.States[i].Epoch,
		})
	}
	return sr
}

// release releases req and checks whether it found the reservation.
func release(t *testing.T, h Harness, req accounting.ReserveRequest, want bool) {
	t.Helper()
	released, err := h.Store.Release(context.Background(), req)
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	if released != want {
		t.Fatalf("Release %s: got released %v, want %v", req.ID, released, want)
	}
}

func assertRecord(t *testing.T, h Harness, id string, want bool) {
	t.Helper()
	if got := h.Record(id); got != want {
		t.Errorf("record of %s: got %v, want %v", id, got, want)
	}
}

func assertDuration(t *testing.T, h Harness, what string, got, want time.Duration) {
	t.Helper()
	d := got - want
	if d < 0 {
		d = -d
	}
	if d > h.Tolerance {
		t.Errorf("%s: got %v, want %v (tolerance %v)", what, got, want, h.Tolerance)
	}
}

func assertRemaining(t *testing.T, st accounting.CounterState, want int64) {
	t.Helper()
	if st.Remaining != want {
		t.Errorf("remaining: got %d, want %d", st.Remaining, want)
	}
}

// alignTo advances the store's clock to offset past the start of the next
// period of length p (aligned to the Unix epoch), and returns that start.
func alignTo(h Harness, p, offset time.Duration) time.Time {
	now := h.Now()
	start := now.Truncate(p).Add(p)
	h.Advance(start.Add(offset).Sub(now))
	return start
}

func testFixedWindow(t *testing.T, h Harness) {
	c := counter("fixed", accounting.FixedWindow, 100, 10*time.Second)
	alignTo(h, 10*time.Second, time.Second)

	st := mustAdmit(t, h, c, 60)
	assertRemaining(t, st, 40)
	assertDuration(t, h, "reset", st.Reset, 9*time.Second)

	st = mustReject(t, h, c, 50)
	assertRemaining(t, st, 40)
	assertDuration(t, h, "retry-after", st.RetryAfter, 9*time.Second)
	if st.NeverFits {
		t.Errorf("NeverFits for an amount within the limit")
	}

	st = mustAdmit(t, h, c, 40)
	assertRemaining(t, st, 0)

	h.Advance(9 * time.Second) // the next window
	st = mustAdmit(t, h, c, 100)
	assertRemaining(t, st, 0)
	assertDuration(t, h, "reset", st.Reset, 10*time.Second)
}

func testFixedWindowNeverFits(t *testing.T, h Harness) {
	c := counter("fixed-never", accounting.FixedWindow, 100, time.Minute)
	st := mustReject(t, h, c, 101)
	if !st.NeverFits {
		t.Errorf("NeverFits: got false, want true")
	}
	if st.RetryAfter != 0 {
		t.Errorf("retry-after: got %v, want 0 for a request that never fits", st.RetryAfter)
	}
	assertRemaining(t, st, 100)
	mustAdmit(t, h, c, 100)
}

func testCalendarMonth(t *testing.T, h Harness) {
	l := accounting.Limit{Name: "monthly", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth, Limit: 1000}
	c := l.Counter(nil)
	// Move to 10s before the next month starts.
	now := h.Now().UTC()
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	h.Advance(next.Add(-10 * time.Second).Sub(now))

	st := mustAdmit(t, h, c, 900)
	assertDuration(t, h, "reset", st.Reset, 10*time.Second)
	st = mustReject(t, h, c, 200)
	assertDuration(t, h, "retry-after", st.RetryAfter, 10*time.Second)

	h.Advance(10 * time.Second)
	st = mustAdmit(t, h, c, 1000)
	following := time.Date(next.Year(), next.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	assertDuration(t, h, "reset in the new month", st.Reset, following.Sub(next))
}

func testSlidingWindow(t *testing.T, h Harness) {
	// Ten slots of one second.
	c := counter("sliding", accounting.SlidingWindow, 100, 10*time.Second)
	alignTo(h, time.Second, 100*time.Millisecond)

	st := mustAdmit(t, h, c, 60)
	assertRemaining(t, st, 40)
	// The charge leaves the count 11 slots after its slot started.
	assertDuration(t, h, "reset", st.Reset, 11*time.Second-100*time.Millisecond)

	h.Advance(5 * time.Second)
	mustAdmit(t, h, c, 40)
	st = mustReject(t, h, c, 1)
	assertRemaining(t, st, 0)
	// The 60 leaves at 11s after its slot start; now is 5.1s past it.
	assertDuration(t, h, "retry-after", st.RetryAfter, 11*time.Second-5100*time.Millisecond)

	h.Advance(st.RetryAfter - 200*time.Millisecond)
	mustReject(t, h, c, 1)
	h.Advance(400 * time.Millisecond)
	st = mustAdmit(t, h, c, 60)
	assertRemaining(t, st, 0)
}

func testSlidingWindowNoEdgeBurst(t *testing.T, h Harness) {
	// A full budget spent at the end of a window must not come back at the
	// window edge, as it would with a fixed window.
	c := counter("sliding-edge", accounting.SlidingWindow, 100, 10*time.Second)
	alignTo(h, 10*time.Second, 9500*time.Millisecond)
	mustAdmit(t, h, c, 100)
	h.Advance(time.Second) // past the fixed-window edge
	mustReject(t, h, c, 1)
	h.Advance(8 * time.Second)
	mustReject(t, h, c, 1)
	h.Advance(2 * time.Second) // 11s after the charge's slot started
	mustAdmit(t, h, c, 100)
}

func testTokenBucket(t *testing.T, h Harness) {
	l := accounting.Limit{Name: "bucket", Algorithm: accounting.TokenBucket, Limit: 100, Window: 10 * time.Second, Burst: 50}
	c := l.Counter(nil)

	st := mustReject(t, h, c, 51)
	if !st.NeverFits {
		t.Errorf("NeverFits for more than the burst: got false, want true")
	}
	st = mustAdmit(t, h, c, 50)
	assertRemaining(t, st, 0)
	assertDuration(t, h, "reset", st.Reset, 5*time.Second)

	st = mustReject(t, h, c, 10) // refills 10 per second
	assertDuration(t, h, "retry-after", st.RetryAfter, time.Second)
	h.Advance(time.Second)
	mustAdmit(t, h, c, 10)
	h.Advance(time.Hour)
	st = mustAdmit(t, h, c, 50)
	assertRemaining(t, st, 0)
}

func testAllOrNothing(t *testing.T, h Harness) {
	big := counter("big", accounting.FixedWindow, 100, time.Minute)
	small := counter("small", accounting.SlidingWindow, 10, time.Minute)
	bucket := counter("bucket", accounting.TokenBucket, 100, time.Minute)
	res, _ := reserve(t, h, item(big, 50), item(small, 20), item(bucket, 50))
	if res.Admitted {
		t.Fatalf("admitted although one item does not fit")
	}
	if !res.States[0].Fits || res.States[1].Fits || !res.States[2].Fits {
		t.Errorf("fits: got %v %v %v, want true false true", res.States[0].Fits, res.States[1].Fits, res.States[2].Fits)
	}
	// Nothing may have been charged.
	res, _ = reserve(t, h, item(big, 100), item(small, 10), item(bucket, 100))
	if !res.Admitted {
		t.Fatalf("full reservation rejected after a rejected one: states %+v", res.States)
	}
}

func testRefund(t *testing.T, h Harness) {
	for _, alg := range []accounting.Algorithm{accounting.FixedWindow, accounting.SlidingWindow, accounting.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			c := counter("refund-"+alg.String(), alg, 100, time.Hour)
			res, req := reserve(t, h, item(c, 80))
			if !res.Admitted {
				t.Fatal("rejected")
			}
			settle(t, h, req, res, 30)
			mustAdmit(t, h, c, 70)
			mustReject(t, h, c, 1)
		})
	}
}

func testExtraCharge(t *testing.T, h Harness) {
	for _, alg := range []accounting.Algorithm{accounting.FixedWindow, accounting.SlidingWindow, accounting.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			c := counter("extra-"+alg.String(), alg, 100, time.Hour)
			res, req := reserve(t, h, item(c, 10))
			settle(t, h, req, res, 90)
			mustAdmit(t, h, c, 10)
			st := mustReject(t, h, c, 1)
			assertRemaining(t, st, 0)
		})
	}
}

func testSettleIdempotent(t *testing.T, h Harness) {
	c := counter("idem", accounting.FixedWindow, 100, time.Hour)
	res, req := reserve(t, h, item(c, 50))
	settle(t, h, req, res, 10)
	// The same settlement again, as a retry after an ambiguous failure
	// sends it: no record, no change.
	for range 2 {
		if err := h.Store.Settle(context.Background(), settleRequest(req, res, 10)); !errors.Is(err, accounting.ErrNoReservation) {
			t.Errorf("settling again: got %v, want ErrNoReservation", err)
		}
	}
	// One refund of 40: 10 used.
	st := mustAdmit(t, h, c, 90)
	assertRemaining(t, st, 0)
}

// testSettleRace sends one settlement many times at once, as a retry can
// race the attempt it repeats: exactly one applies.
func testSettleRace(t *testing.T, h Harness) {
	for _, alg := range []accounting.Algorithm{accounting.FixedWindow, accounting.SlidingWindow, accounting.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			c := counter("race-"+alg.String(), alg, 1000, time.Hour)
			res, req := reserve(t, h, item(c, 100))
			sr := settleRequest(req, res, 300) // an extra charge of 200 each time it applies
			const racers = 16
			var applied, none atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range racers {
				wg.Go(func() {
					<-start
					switch err := h.Store.Settle(context.Background(), sr); {
					case err == nil:
						applied.Add(1)
					case errors.Is(err, accounting.ErrNoReservation):
						none.Add(1)
					default:
						t.Errorf("Settle: %v", err)
					}
				})
			}
			close(start)
			wg.Wait()
			if applied.Load() != 1 || none.Load() != racers-1 {
				t.Errorf("settlements: got %d applied and %d without a record, want 1 and %d", applied.Load(), none.Load(), racers-1)
			}
			st := mustAdmit(t, h, c, 700)
			assertRemaining(t, st, 0)
		})
	}
}

func testSettleWithoutReservation(t *testing.T, h Harness) {
	c := counter("unknown", accounting.FixedWindow, 100, time.Hour)
	mustAdmit(t, h, c, 50)
	sr := accounting.SettleRequest{ID: newID(), Items: []accounting.SettleItem{{Counter: c, Reserved: 50, Actual: 0}}}
	if err := h.Store.Settle(context.Background(), sr); !errors.Is(err, accounting.ErrNoReservation) {
		t.Errorf("Settle of a reservation never made: got %v, want ErrNoReservation", err)
	}
	st := mustReject(t, h, c, 51)
	assertRemaining(t, st, 50)
}

// testRecords pins what a store keeps per reservation: a record while it
// is in flight, nothing once it is settled (even by a settlement equal to
// its estimate, which changes no counter), nothing for a rejection.
func testRecords(t *testing.T, h Harness) {
	c := counter("records", accounting.FixedWindow, 100, time.Hour)
	res, req := reserve(t, h, item(c, 60))
	assertRecord(t, h, req.ID, true)
	settle(t, h, req, res, 70)
	assertRecord(t, h, req.ID, false)

	res, req = reserve(t, h, item(c, 20))
	assertRecord(t, h, req.ID, true)
	settle(t, h, req, res, 20)
	assertRecord(t, h, req.ID, false)

	res, req = reserve(t, h, item(c, 21))
	if res.Admitted {
		t.Fatal("admitted over the limit")
	}
	assertRecord(t, h, req.ID, false)
	st := mustReject(t, h, c, 11)
	assertRemaining(t, st, 10)
}

// testRecordExpires settles after accounting.RecordExpiry: the record is
// gone, the settlement changes nothing, the estimate stays charged.
func testRecordExpires(t *testing.T, h Harness) {
	c := counter("expires", accounting.FixedWindow, 100, 24*time.Hour)
	alignTo(h, 24*time.Hour, time.Hour)
	expiry := alignToGrain(h, time.Minute)
	res, req := reserve(t, h, item(c, 60))
	h.Advance(expiry.Sub(h.Now()) - time.Second)
	assertRecord(t, h, req.ID, true)
	h.Advance(2 * time.Second)
	assertRecord(t, h, req.ID, false)
	if err := h.Store.Settle(context.Background(), settleRequest(req, res, 10)); !errors.Is(err, accounting.ErrNoReservation) {
		t.Errorf("settling after the record TTL: got %v, want ErrNoReservation", err)
	}
	st := mustReject(t, h, c, 41)
	assertRemaining(t, st, 40)
}

// testRelease undoes reservations whose answer was lost: every item is
// refunded once, and the reservation can no longer be settled.
func testRelease(t *testing.T, h Harness) {
	for _, alg := range []accounting.Algorithm{accounting.FixedWindow, accounting.SlidingWindow, accounting.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			c := counter("release-"+alg.String(), alg, 100, time.Hour)
			other := counter("release-other-"+alg.String(), alg, 1000, time.Hour)
			res, req := reserve(t, h, item(c, 80), item(other, 80))
			if !res.Admitted {
				t.Fatal("rejected")
			}
			release(t, h, req, true)
			assertRecord(t, h, req.ID, false)
			if err := h.Store.Settle(context.Background(), settleRequest(req, res, 0, 0)); !errors.Is(err, accounting.ErrNoReservation) {
				t.Errorf("settling a released reservation: got %v, want ErrNoReservation", err)
			}
			mustAdmit(t, h, c, 100)
			mustAdmit(t, h, other, 1000)
			// Releasing again refunds nothing.
			release(t, h, req, false)
			mustReject(t, h, c, 1)
			mustReject(t, h, other, 1)
		})
	}
	t.Run("rejected", func(t *testing.T) {
		c := counter("release-rejected", accounting.FixedWindow, 100, time.Hour)
		mustAdmit(t, h, c, 60)
		res, req := reserve(t, h, item(c, 50))
		if res.Admitted {
			t.Fatal("admitted over the limit")
		}
		release(t, h, req, false)
		st := mustReject(t, h, c, 41)
		assertRemaining(t, st, 40)
	})
}

// testReleaseBeforeReserve delivers a release before the reservation it
// releases, as two connections may: the tombstone makes the reservation
// charge nothing, until it expires (accounting.RecordExpiry).
func testReleaseBeforeReserve(t *testing.T, h Harness) {
	c := counter("overtaken", accounting.FixedWindow, 100, 24*time.Hour)
	alignTo(h, 24*time.Hour, time.Hour)
	req := accounting.ReserveRequest{ID: newID(), Items: []accounting.ReserveItem{item(c, 70)}}
	release(t, h, req, false)
	assertRecord(t, h, req.ID, true)
	if _, err := h.Store.Reserve(context.Background(), req); !errors.Is(err, accounting.ErrReleased) {
		t.Fatalf("Reserve after its release: got %v, want ErrReleased", err)
	}
	st := mustAdmit(t, h, c, 100)
	assertRemaining(t, st, 0)
	// A reservation that does not fit is rejected as usual: the
	// tombstone only stops a charge.
	res, err := h.Store.Reserve(context.Background(), req)
	if err != nil || res.Admitted {
		t.Errorf("Reserve over the limit after its release: got admitted %v, err %v; want a rejection", res.Admitted, err)
	}

	c2 := counter("overtaken-late", accounting.FixedWindow, 100, 24*time.Hour)
	req = accounting.ReserveRequest{ID: newID(), Items: []accounting.ReserveItem{item(c2, 70)}}
	release(t, h, req, false)
	h.Advance(accounting.RecordTTL + accounting.RecordGrain + time.Second)
	if res, err := h.Store.Reserve(context.Background(), req); err != nil || !res.Admitted {
		t.Errorf("Reserve after the tombstone expired: got admitted %v, err %v; want admitted", res.Admitted, err)
	}
}

// testReleaseAfterRollover releases reservations whose window moved on:
// the refund follows settlement's rules (the booked window or slot, and
// nothing once it is gone).
func testReleaseAfterRollover(t *testing.T, h Harness) {
	t.Run("fixed", func(t *testing.T) {
		c := counter("release-roll-fixed", accounting.FixedWindow, 100, 10*time.Second)
		alignTo(h, 10*time.Second, 5*time.Second)
		_, req := reserve(t, h, item(c, 60))
		h.Advance(10 * time.Second)
		release(t, h, req, true)
		mustAdmit(t, h, c, 100)
		mustReject(t, h, c, 1)
	})
	t.Run("sliding", func(t *testing.T) {
		c := counter("release-roll-sliding", accounting.SlidingWindow, 100, 10*time.Second)
		alignTo(h, time.Second, 100*time.Millisecond)
		_, req := reserve(t, h, item(c, 60))
		h.Advance(3 * time.Second)
		mustAdmit(t, h, c, 40)
		release(t, h, req, true)
		mustAdmit(t, h, c, 60)
		mustReject(t, h, c, 1)
	})
}

func testSettleAfterFixedRollover(t *testing.T, h Harness) {
	c := counter("roll-fixed", accounting.FixedWindow, 100, 10*time.Second)
	alignTo(h, 10*time.Second, 5*time.Second)
	resUp, reqUp := reserve(t, h, item(c, 10))
	resDown, reqDown := reserve(t, h, item(c, 50))
	h.Advance(10 * time.Second)
	// The extra 20 of the first lands on the new window; the refund of
	// the second is dropped (its window is gone).
	settle(t, h, reqUp, resUp, 30)
	settle(t, h, reqDown, resDown, 0)
	st := mustAdmit(t, h, c, 80)
	assertRemaining(t, st, 0)
}

func testSettleAfterSlidingRollover(t *testing.T, h Harness) {
	c := counter("roll-sliding", accounting.SlidingWindow, 100, 10*time.Second)
	alignTo(h, time.Second, 100*time.Millisecond)
	res, req := reserve(t, h, item(c, 10))
	h.Advance(20 * time.Second)
	settle(t, h, req, res, 30)
	st := mustAdmit(t, h, c, 80)
	assertRemaining(t, st, 0)

	// A settlement inside the window corrects the slot it was booked in.
	c2 := counter("roll-sliding-in", accounting.SlidingWindow, 100, 10*time.Second)
	res, req = reserve(t, h, item(c2, 90))
	h.Advance(3 * time.Second)
	settle(t, h, req, res, 40)
	mustAdmit(t, h, c2, 60)
}

func testTokenBucketRefundCapped(t *testing.T, h Harness) {
	c := counter("bucket-cap", accounting.TokenBucket, 100, time.Hour)
	res, req := reserve(t, h, item(c, 10))
	h.Advance(10 * time.Minute) // full again (10 refill in 6 minutes)
	settle(t, h, req, res, 0)
	// The refund must not lift the bucket above its capacity.
	mustAdmit(t, h, c, 100)
	mustReject(t, h, c, 1)
}

func testIdleExpiry(t *testing.T, h Harness) {
	cases := []struct {
		name string
		c    accounting.Counter
		max  time.Duration // longest the key may live after its last charge
	}{
		{"fixed", counter("exp-fixed", accounting.FixedWindow, 100, 10*time.Second), 10 * time.Second},
		{"sliding", counter("exp-sliding", accounting.SlidingWindow, 100, 10*time.Second), 11 * time.Second},
		// A bucket is kept while the reservation charged to it may still
		// settle (see accounting.CounterState.InFlight), however soon it
		// is full again.
		{"bucket", counter("exp-bucket", accounting.TokenBucket, 100, 10*time.Second), accounting.RecordTTL + accounting.RecordGrain},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mustAdmit(t, h, tc.c, 100)
			ttl, ok := h.TTL(tc.c.Key)
			if !ok {
				t.Fatalf("key %s missing right after a charge", tc.c.Key)
			}
			if ttl <= 0 || ttl > tc.max+time.Second+h.Tolerance {
				t.Errorf("ttl: got %v, want in (0, %v]", ttl, tc.max+time.Second)
			}
		})
	}
}

func testDistinctKeys(t *testing.T, h Harness) {
	l := accounting.Limit{Name: "per-pair", Algorithm: accounting.FixedWindow, Limit: 1, Window: time.Hour, Scope: []string{"tenant", "user"}}
	a := l.Counter(accounting.Attributes{{Name: "tenant", Value: "a:b"}, {Name: "user", Value: "c"}})
	b := l.Counter(accounting.Attributes{{Name: "tenant", Value: "a"}, {Name: "user", Value: "b:c"}})
	if a.Key == b.Key {
		t.Fatalf("keys collide: %q", a.Key)
	}
	mustAdmit(t, h, a, 1)
	mustAdmit(t, h, b, 1)
	mustReject(t, h, a, 1)
}

func testConcurrent(t *testing.T, h Harness) {
	for _, alg := range []accounting.Algorithm{accounting.FixedWindow, accounting.SlidingWindow, accounting.TokenBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			const limit, amount, workers = 1000, 7, 300
			c := counter("concurrent-"+alg.String(), alg, limit, time.Hour)
			other := counter("concurrent-other-"+alg.String(), alg, 1_000_000, time.Hour)
			var admitted atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for range workers {
				wg.Go(func() {
					res, err := h.Store.Reserve(context.Background(), accounting.ReserveRequest{
						ID: newID(), Items: []accounting.ReserveItem{item(other, amount), item(c, amount)},
					})
					if err != nil {
						errs <- err
						return
					}
					if res.Admitted {
						admitted.Add(amount)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("Reserve: %v", err)
			}
			// Never more than the limit, and no waste: all but less
			// than one request's amount is used.
			if got := admitted.Load(); got > limit || got <= limit-amount {
				t.Errorf("admitted: got %d, want in (%d, %d]", got, limit-amount, limit)
			}
		})
	}
}

func testPing(t *testing.T, h Harness) {
	if err := h.Store.Ping(context.Background()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}
