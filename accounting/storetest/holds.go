package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// RunHolds runs the contract suite of [accounting.Holder] on stores that
// implement it; newHarness is called once per subtest and must return an
// empty store.
func RunHolds(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness, hs accounting.Holder)
	}{
		{"SettlesOnceAfterRecordTTL", testHoldSettlesOnce},
		{"Expires", testHoldExpires},
		{"TakenOnce", testHoldTakenOnce},
		{"HeldTwice", testHoldHeldTwice},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			hs, ok := h.Store.(accounting.Holder)
			if !ok {
				t.Fatalf("%T does not implement accounting.Holder", h.Store)
			}
			tt.fn(t, h, hs)
		})
	}
}

// holdWeek is the window of the counters the hold tests charge: a hold
// is settled within it, long after accounting.RecordTTL.
const holdWeek = 7 * 24 * time.Hour

// heldReservation reserves amount on each counter, settles the
// reservation on what it reserved (its charge stays), and holds it as
// id for ttl with data. It returns the settlement of the hold at actual.
func heldReservation(t *testing.T, h Harness, hs accounting.Holder, id string, ttl time.Duration, data string,
	amount, actual int64, counters ...accounting.Counter) accounting.SettleRequest {
	t.Helper()
	items := make([]accounting.ReserveItem, len(counters))
	for i, c := range counters {
		items[i] = item(c, amount)
	}
	res, req := reserve(t, h, items...)
	if !res.Admitted {
		t.Fatalf("reserving %d: rejected", amount)
	}
	kept := make([]int64, len(counters))
	for i := range kept {
		kept[i] = amount
	}
	settle(t, h, req, res, kept...)
	if err := hs.Hold(context.Background(), accounting.HoldRequest{ID: id, Counters: counters, TTL: ttl, Data: []byte(data)}); err != nil {
		t.Fatalf("Hold: %v", err)
	}
	later := make([]int64, len(counters))
	for i := range later {
		later[i] = actual
	}
	sr := settleRequest(req, res, later...)
	sr.ID = id
	return sr
}

// testHoldSettlesOnce: a hold taken and settled long after RecordTTL
// corrects every counter once; a second settlement changes nothing.
func testHoldSettlesOnce(t *testing.T, h Harness, hs accounting.Holder) {
	a := counter("hold-a", accounting.FixedWindow, 100, holdWeek)
	b := counter("hold-b", accounting.FixedWindow, 1000, holdWeek)
	alignTo(h, holdWeek, time.Hour)
	id := newID()
	sr := heldReservation(t, h, hs, id, 2*24*time.Hour, "note", 60, 10, a, b)
	h.Advance(accounting.RecordTTL + time.Hour)
	assertRecord(t, h, id, true)
	data, err := hs.TakeHold(context.Background(), id)
	if err != nil || string(data) != "note" {
		t.Fatalf("TakeHold: got %q, %v, want \"note\", nil", data, err)
	}
	if err := h.Store.Settle(context.Background(), sr); err != nil {
		t.Fatalf("settling the hold: %v", err)
	}
	assertRecord(t, h, id, false)
	if err := h.Store.Settle(context.Background(), sr); !errors.Is(err, accounting.ErrNoReservation) {
		t.Errorf("settling the hold again: got %v, want ErrNoReservation", err)
	}
	// 60 reserved, 10 used: 90 left on a, 990 on b.
	assertRemaining(t, mustReject(t, h, a, 91), 90)
	assertRemaining(t, mustReject(t, h, b, 991), 990)
}

// testHoldExpires: past its TTL a hold can be neither taken nor settled,
// and its charge stays.
func testHoldExpires(t *testing.T, h Harness, hs accounting.Holder) {
	c := counter("hold-expires", accounting.FixedWindow, 100, holdWeek)
	alignTo(h, holdWeek, time.Hour)
	id := newID()
	ttl := 2 * accounting.RecordTTL
	sr := heldReservation(t, h, hs, id, ttl, "note", 60, 10, c)
	h.Advance(ttl - time.Second)
	assertRecord(t, h, id, true)
	h.Advance(2 * time.Second)
	assertRecord(t, h, id, false)
	if data, err := hs.TakeHold(context.Background(), id); !errors.Is(err, accounting.ErrNoReservation) {
		t.Errorf("taking an expired hold: got %q, %v, want ErrNoReservation", data, err)
	}
	if err := h.Store.Settle(context.Background(), sr); !errors.Is(err, accounting.ErrNoReservation) {
		t.Errorf("settling an expired hold: got %v, want ErrNoReservation", err)
	}
	assertRemaining(t, mustReject(t, h, c, 41), 40)
}

// testHoldTakenOnce: of the callers racing for a hold, one gets it.
func testHoldTakenOnce(t *testing.T, h Harness, hs accounting.Holder) {
	c := counter("hold-taken", accounting.FixedWindow, 100, holdWeek)
	alignTo(h, holdWeek, time.Hour)
	id := newID()
	heldReservation(t, h, hs, id, 2*24*time.Hour, "note", 10, 10, c)
	const racers = 8
	got := make(chan error, racers)
	for range racers {
		go func() {
			_, err := hs.TakeHold(context.Background(), id)
			got <- err
		}()
	}
	taken := 0
	for range racers {
		switch err := <-got; {
		case err == nil:
			taken++
		case !errors.Is(err, accounting.ErrNoReservation):
			t.Errorf("TakeHold: %v", err)
		}
	}
	if taken != 1 {
		t.Errorf("racing TakeHolds: %d took the hold, want 1", taken)
	}
	if _, err := hs.TakeHold(context.Background(), newID()); !errors.Is(err, accounting.ErrNoReservation) {
		t.Errorf("taking a hold never made: got %v, want ErrNoReservation", err)
	}
}

// testHoldHeldTwice: a second hold of a live one's ID changes nothing.
func testHoldHeldTwice(t *testing.T, h Harness, hs accounting.Holder) {
	c := counter("hold-twice", accounting.FixedWindow, 100, holdWeek)
	id := newID()
	heldReservation(t, h, hs, id, 2*24*time.Hour, "first", 10, 10, c)
	err := hs.Hold(context.Background(), accounting.HoldRequest{ID: id, Counters: []accounting.Counter{c}, TTL: time.Hour, Data: []byte("second")})
	if !errors.Is(err, accounting.ErrHeld) {
		t.Errorf("holding again: got %v, want ErrHeld", err)
	}
	if data, err := hs.TakeHold(context.Background(), id); err != nil || string(data) != "first" {
		t.Errorf("TakeHold: got %q, %v, want \"first\", nil", data, err)
	}
}
