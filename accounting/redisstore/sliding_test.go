package redisstore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestSlidingValue checks the stored value of a sliding window (the
// newest slot, the total, the amounts newest first, and the pieces that
// hold what is in flight) after the writes the fast paths make from its
// bytes: a charge in a slot after the newest, and a settlement of an
// older slot. Both must leave the value the general path would: zeros at
// the old end dropped, and a piece's amount taken out by its
// reservation's settlement. TestMatchesMemstore checks the answers; this
// checks what Redis keeps.
func TestSlidingValue(t *testing.T) {
	srv := redistest.Start(t)
	admin := adminClient(t, srv)
	s := newStore(t, srv, Options{})
	ctx := context.Background()
	start := time.Date(2026, time.November, 30, 12, 0, 0, 0, time.UTC)
	l := accounting.Limit{Name: "tpm", Algorithm: accounting.SlidingWindow, Limit: 1_000_000, Window: time.Minute}
	c := l.Counter(nil)
	slot := time.Duration(accounting.SlotLength(&c)) * time.Microsecond
	first := start.UnixMicro() / accounting.SlotLength(&c)

	reserve := func(id string, amount int64) accounting.SettleRequest {
		t.Helper()
		req := accounting.ReserveRequest{ID: id, Items: []accounting.ReserveItem{{Counter: c, Amount: amount}}}
		res, err := s.Reserve(ctx, req)
		if err != nil || !res.Admitted {
			t.Fatalf("reserve %s: admitted %v, err %v", id, res.Admitted, err)
		}
		return accounting.SettleRequest{ID: id, Items: []accounting.SettleItem{{Counter: c, Reserved: amount, Mark: res.States[0].Mark}}}
	}
	settle := func(sr accounting.SettleRequest, actual int64) {
		t.Helper()
		sr.Items[0].Actual = actual
		if err := s.Settle(ctx, sr); err != nil {
			t.Fatalf("settle %s: %v", sr.ID, err)
		}
	}
	// piece is the start of the piece of slot k (one grain holds many
	// slots of six seconds).
	piece := func(k int64) float64 {
		return float64(accounting.InFlightPiece(&c, k*accounting.SlotLength(&c)))
	}
	check := func(step string, n, total float64, slots []float64, pieces ...float64) {
		t.Helper()
		got, ok := slidingValue(t, admin, c.Key)
		want := sliding{n: n, total: total, slots: slots, pieces: pieces}
		if !ok || got.n != want.n || got.total != want.total || got.born != 0 ||
			!slices.Equal(got.slots, want.slots) || !slices.Equal(got.pieces, want.pieces) {
			t.Errorf("%s: got %+v, want %+v", step, got, want)
		}
	}

	f := float64(first)
	s.frozen.Store(start.UnixMicro())
	a := reserve("a", 100)
	b := reserve("b", 50)
	check("two charges in one slot", f, 150, []float64{150}, piece(first), 150)
	s.frozen.Store(start.Add(3 * slot).UnixMicro())
	cc := reserve("c", 7)
	check("a charge three slots on", f+3, 157, []float64{7, 0, 0, 150}, piece(first+3), 7, piece(first), 150)
	settle(a, 40)
	check("a refund to the oldest slot", f+3, 97, []float64{7, 0, 0, 90}, piece(first+3), 7, piece(first), 50)
	settle(b, 0)
	check("another refund to the oldest slot", f+3, 47, []float64{7, 0, 0, 40}, piece(first+3), 7, piece(first), 0)
	settle(cc, 7)
	check("a settlement at its estimate", f+3, 47, []float64{7, 0, 0, 40}, piece(first+3), 0, piece(first), 0)
	s.frozen.Store(start.Add(4 * slot).UnixMicro())
	d := reserve("d", 5)
	// Pieces that hold nothing are dropped when one is added.
	check("a charge one slot on", f+4, 52, []float64{5, 7, 0, 0, 40}, piece(first+4), 5)
	s.frozen.Store(start.Add(5 * slot).UnixMicro())
	reserve("e", 2)
	check("another slot on", f+5, 54, []float64{2, 5, 7, 0, 0, 40}, piece(first+5), 2, piece(first+4), 5)
	settle(d, 1)
	check("a refund to a slot between", f+5, 50, []float64{2, 1, 7, 0, 0, 40}, piece(first+5), 2, piece(first+4), 0)

	// A settlement in an older slot whose piece is still the newest: the
	// slots moved on by the extra charge of a reservation whose own slot
	// has left the window, which takes no piece.
	s3 := accounting.Limit{Name: "tpm3", Algorithm: accounting.SlidingWindow, Limit: 1_000_000, Window: time.Minute}
	c = s3.Counter(nil)
	s.frozen.Store(start.UnixMicro())
	o := reserve("o", 10)
	s.frozen.Store(start.Add(10 * slot).UnixMicro())
	r := reserve("r", 40)
	s.frozen.Store(start.Add(12 * slot).UnixMicro())
	settle(o, 25)
	check("an extra charge after its slot left", f+12, 55, []float64{15, 0, 40}, piece(first+10), 40, piece(first), 0)
	settle(r, 30)
	check("a refund to an older slot, its piece the newest", f+12, 45, []float64{15, 0, 30}, piece(first+10), 0, piece(first), 0)

	// A settlement that leaves the oldest slot empty: the value ends at
	// the newest slot with an amount.
	s2 := accounting.Limit{Name: "tpm2", Algorithm: accounting.SlidingWindow, Limit: 1_000_000, Window: time.Minute}
	c = s2.Counter(nil)
	s.frozen.Store(start.UnixMicro())
	old := reserve("old", 30)
	s.frozen.Store(start.Add(2 * slot).UnixMicro())
	reserve("new", 4)
	check("two slots", f+2, 34, []float64{4, 0, 30}, piece(first+2), 4, piece(first), 30)
	settle(old, 0)
	check("the oldest slot emptied", f+2, 4, []float64{4}, piece(first+2), 4, piece(first), 0)
	// Eleven slots on, nothing of the old slots stays, nor of their
	// pieces.
	s.frozen.Store(start.Add(13 * slot).UnixMicro())
	reserve("late", 9)
	check("a charge a whole window on", f+13, 9, []float64{9}, piece(first+13), 9)
}
