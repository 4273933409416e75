package accounting_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

func TestLifetimeLimitValidate(t *testing.T) {
	ok := accounting.Limit{Name: "run-steps", Dimension: accounting.Requests, Algorithm: accounting.Lifetime, Scope: []string{"run"}, Limit: 50, Window: time.Hour}
	tests := []struct {
		name   string
		change func(l *accounting.Limit)
		want   []string
	}{
		{"valid", func(*accounting.Limit) {}, nil},
		{"valid cost", func(l *accounting.Limit) { l.Dimension = accounting.Cost }, nil},
		{"no max duration", func(l *accounting.Limit) { l.Window = 0 }, []string{"max_duration"}},
		{"max duration too long", func(l *accounting.Limit) { l.Window = accounting.MaxWindow + time.Second }, []string{"max_duration"}},
		{"a calendar month", func(l *accounting.Limit) { l.Calendar = accounting.CalendarMonth }, []string{"max_duration"}},
		{"burst", func(l *accounting.Limit) { l.Burst = 5 }, []string{"burst"}},
		{"zero limit", func(l *accounting.Limit) { l.Limit = 0 }, []string{"limit"}},
		{"concurrent", func(l *accounting.Limit) { l.Dimension = accounting.Concurrent }, []string{"algorithm"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := ok
			tt.change(&l)
			if got := fields(t, l.Validate()); !slices.Equal(got, tt.want) {
				t.Errorf("fields: got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLifetimeLimiter: a run's lifetime budget names itself in the trip
// as final, ahead of a rate limit that also refuses the request, and a
// run past its wall-clock cap is reported expired.
func TestLifetimeLimiter(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	store := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	l, err := accounting.New(accounting.Options{
		Store: store,
		Limits: []accounting.Limit{
			{Name: "per-second", Dimension: accounting.Requests, Scope: []string{"run"}, Algorithm: accounting.FixedWindow, Limit: 3, Window: time.Second},
			{Name: "run-steps", Dimension: accounting.Requests, Algorithm: accounting.Lifetime, Scope: []string{"run"}, Limit: 3, Window: time.Hour},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := accounting.Request{Attributes: accounting.Attributes{{Name: "run", Value: "r1"}}}
	for i := range 3 {
		r, err := l.Reserve(ctx, req)
		if err != nil || !r.Admitted {
			t.Fatalf("step %d: %+v, %v", i+1, r, err)
		}
	}
	r, err := l.Reserve(ctx, req)
	if err != nil || r.Admitted {
		t.Fatalf("step 4: %+v, %v; want rejected", r, err)
	}
	if r.Trip.Limit.Name != "run-steps" || !r.Trip.Final || r.Trip.Expired || r.Trip.RetryAfter != 0 {
		t.Errorf("trip: got %s final %v expired %v retry %v, want run-steps, final, not expired, no retry",
			r.Trip.Limit.Name, r.Trip.Final, r.Trip.Expired, r.Trip.RetryAfter)
	}
	now = now.Add(time.Hour)
	r, err = l.Reserve(ctx, accounting.Request{Attributes: accounting.Attributes{{Name: "run", Value: "r1"}}})
	if err != nil || r.Admitted || !r.Trip.Final || !r.Trip.Expired {
		t.Fatalf("past the cap: %+v, %v; want a final, expired trip", r.Trip, err)
	}
	// Another run has its own budget.
	if r, err := l.Reserve(ctx, accounting.Request{Attributes: accounting.Attributes{{Name: "run", Value: "r2"}}}); err != nil || !r.Admitted {
		t.Fatalf("another run: %+v, %v; want admitted", r, err)
	}
}
