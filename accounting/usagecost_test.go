package accounting_test

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// TestReservationUsageCost: what UsageCost reports is what Settle books
// on a cost limit, price factor included.
func TestReservationUsageCost(t *testing.T) {
	tests := []struct {
		name   string
		model  string
		factor float64
		want   int64 // micro-dollars for 100 in, 50 out
	}{
		{"listed price", "cheap", 0, 100*1 + 50*2},
		{"default price", "unlisted", 0, 100*10 + 50*30},
		{"priority tier", "cheap", 2, 2 * (100*1 + 50*2)},
	}
	usage := accounting.Usage{InputTokens: 100, OutputTokens: 50}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memstore.New(memstore.Options{})
			l := newLimiter(t, store, limit("spend", accounting.Cost, 1_000_000, "tenant"))
			r, err := l.Reserve(t.Context(), accounting.Request{Attributes: tenant, Model: tt.model, PriceFactor: tt.factor,
				Estimate: accounting.Estimate{InputTokens: 100, OutputTokens: 400}})
			if err != nil || !r.Admitted {
				t.Fatalf("Reserve: %v", err)
			}
			got, ok := r.UsageCost(usage)
			if !ok || got != tt.want {
				t.Errorf("UsageCost: got %d (ok %v), want %d", got, ok, tt.want)
			}
			if _, err := r.Settle(t.Context(), usage); err != nil {
				t.Fatal(err)
			}
			if rem := r.Dims[accounting.Cost].Remaining; rem != 1_000_000-r.Cost {
				t.Fatalf("remaining after reserving: got %d, want %d", rem, 1_000_000-r.Cost)
			}
			lim := l.Limits()[0]
			res, err := store.Reserve(t.Context(), accounting.ReserveRequest{ID: "probe",
				Items: []accounting.ReserveItem{{Counter: lim.Counter(tenant), Amount: 0}}})
			if err != nil {
				t.Fatal(err)
			}
			if booked := lim.Capacity() - res.States[0].Remaining; booked != got {
				t.Errorf("Settle booked %d µ$, UsageCost said %d", booked, got)
			}
		})
	}
	if _, ok := (&accounting.Reservation{Model: "cheap"}).UsageCost(usage); ok {
		t.Error("a Reservation not made by a Limiter: got a cost, want none")
	}
}
