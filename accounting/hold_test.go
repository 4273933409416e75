package accounting_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// holdLimits are a week's limits on each dimension, and a concurrent one.
func holdLimits() []accounting.Limit {
	week := func(name string, d accounting.Dimension, n int64) accounting.Limit {
		return accounting.Limit{Name: name, Dimension: d, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: n, Window: 7 * 24 * time.Hour}
	}
	return []accounting.Limit{
		week("requests", accounting.Requests, 10),
		week("tokens", accounting.Tokens, 10_000),
		week("spend", accounting.Cost, 1_000_000),
		{Name: "in-flight", Dimension: accounting.Concurrent, Scope: []string{"tenant"}, Algorithm: accounting.Leases, Limit: 1, Window: time.Minute},
	}
}

// leftAfterHold reserves nothing and returns what each dimension has left.
func leftAfterHold(t *testing.T, l *accounting.Limiter) map[accounting.Dimension]int64 {
	t.Helper()
	r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Model: "cheap", RequestsOnly: true})
	if err != nil || !r.Admitted {
		t.Fatalf("Reserve: admitted %v, err %v", r != nil && r.Admitted, err)
	}
	if _, err := r.Settle(t.Context(), accounting.Usage{}); err != nil {
		t.Fatal(err)
	}
	tokens, _ := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Model: "cheap"})
	got := map[accounting.Dimension]int64{accounting.Requests: r.Dims[accounting.Requests].Remaining}
	if tokens.Admitted {
		got[accounting.Tokens] = tokens.Dims[accounting.Tokens].Remaining
		got[accounting.Cost] = tokens.Dims[accounting.Cost].Remaining
		if _, err := tokens.Settle(t.Context(), accounting.Usage{}); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// heldBatch reserves 1000 input and 4000 output tokens of "cheap" and
// holds them as id.
func heldBatch(t *testing.T, l *accounting.Limiter, id string) {
	t.Helper()
	r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Model: "cheap", PriceFactor: 0.5,
		Estimate: accounting.Estimate{InputTokens: 1000, OutputTokens: 4000}})
	if err != nil || !r.Admitted {
		t.Fatalf("Reserve: admitted %v, err %v", r != nil && r.Admitted, err)
	}
	if err := r.Hold(t.Context(), id, []byte("3 requests")); err != nil {
		t.Fatalf("Hold: %v", err)
	}
	if !r.Settled() {
		t.Error("the held reservation is not settled")
	}
}

// TestHoldSettlesOnUsageLongAfterTheRequest: a held reservation keeps its
// charge on every dimension but returns its lease at once; taken and
// settled days later, it books the usage at the price it was reserved at,
// once.
func TestHoldSettlesOnUsageLongAfterTheRequest(t *testing.T) {
	c := &clock{now: time.Date(2026, 3, 5, 1, 0, 0, 0, time.UTC)} // a week's window (from the epoch's Thursday) has just begun
	l := newLimiter(t, memstore.New(memstore.Options{Now: c.Now}), holdLimits()...)
	heldBatch(t, l, "batch-1")
	// Half of "cheap" ($1/M in, $2/M out): 1000 × 0.5 + 4000 × 1 = 4500 µ$.
	want := map[accounting.Dimension]int64{accounting.Requests: 8, accounting.Tokens: 5000, accounting.Cost: 1_000_000 - 4500}
	if got := leftAfterHold(t, l); !sameRemaining(got, want) {
		t.Fatalf("after the hold: got %v, want %v (and the lease back: a request got in)", got, want)
	}

	c.Advance(2 * 24 * time.Hour)
	h, err := l.TakeHold(t.Context(), "batch-1")
	if err != nil {
		t.Fatalf("TakeHold: %v", err)
	}
	if string(h.Note) != "3 requests" || h.Model != "cheap" || h.Reserved.Total() != 5000 {
		t.Errorf("held: note %q, model %q, reserved %v; want \"3 requests\", cheap, 5000", h.Note, h.Model, h.Reserved)
	}
	if _, err := l.TakeHold(t.Context(), "batch-1"); !errors.Is(err, accounting.ErrNoReservation) {
		t.Errorf("taking the hold again: got %v, want ErrNoReservation", err)
	}
	// 600 in, 300 out: 600 × 0.5 + 300 × 1 = 600 µ$.
	if err := h.Settle(t.Context(), accounting.Usage{InputTokens: 600, OutputTokens: 300}); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	want = map[accounting.Dimension]int64{accounting.Requests: 6, accounting.Tokens: 10_000 - 900, accounting.Cost: 1_000_000 - 600}
	if got := leftAfterHold(t, l); !sameRemaining(got, want) {
		t.Errorf("after the settlement: got %v, want %v", got, want)
	}
	if err := h.Settle(t.Context(), accounting.Usage{}); err != nil {
		t.Fatalf("Settle again: %v", err)
	}
	if got := leftAfterHold(t, l); !sameRemaining(got, map[accounting.Dimension]int64{accounting.Requests: 4, accounting.Tokens: 9100, accounting.Cost: 1_000_000 - 600}) {
		t.Errorf("a second settlement changed the counters: got %v", got)
	}
}

// TestUntakenHoldKeepsTheCharge: a hold nobody settles keeps its whole
// estimate charged, past its TTL too; Keep settles it so.
func TestUntakenHoldKeepsTheCharge(t *testing.T) {
	c := &clock{now: time.Date(2026, 3, 5, 1, 0, 0, 0, time.UTC)}
	l := newLimiter(t, memstore.New(memstore.Options{Now: c.Now}), holdLimits()...)
	heldBatch(t, l, "never-fetched")
	heldBatch(t, l, "unreadable")
	h, err := l.TakeHold(t.Context(), "unreadable")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Keep(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.Advance(5 * 24 * time.Hour)
	want := map[accounting.Dimension]int64{accounting.Requests: 7, accounting.Tokens: 0, accounting.Cost: 1_000_000 - 9000}
	if got := leftAfterHold(t, l); !sameRemaining(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	c.Advance(accounting.HoldTTL)
	if _, err := l.TakeHold(t.Context(), "never-fetched"); !errors.Is(err, accounting.ErrNoReservation) {
		t.Errorf("taking an expired hold: got %v, want ErrNoReservation", err)
	}
}

func sameRemaining(got, want map[accounting.Dimension]int64) bool {
	for d, n := range want {
		if got[d] != n {
			return false
		}
	}
	return len(got) == len(want)
}
