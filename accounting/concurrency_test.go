package accounting_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

func TestConcurrentLimitValidate(t *testing.T) {
	ok := accounting.Limit{Name: "in-flight", Dimension: accounting.Concurrent, Algorithm: accounting.Leases, Limit: 2, Window: accounting.DefaultLease}
	tests := []struct {
		name   string
		change func(l *accounting.Limit)
		want   []string
	}{
		{"valid", func(*accounting.Limit) {}, nil},
		{"shortest lease", func(l *accounting.Limit) { l.Window = accounting.MinLease }, nil},
		{"longest lease", func(l *accounting.Limit) { l.Window = accounting.MaxLease }, nil},
		{"lease too short", func(l *accounting.Limit) { l.Window = time.Millisecond }, []string{"lease"}},
		{"lease past the record TTL", func(l *accounting.Limit) { l.Window = accounting.RecordTTL + time.Second }, []string{"lease"}},
		{"no lease", func(l *accounting.Limit) { l.Window = 0 }, []string{"lease"}},
		{"a calendar month", func(l *accounting.Limit) { l.Calendar = accounting.CalendarMonth }, []string{"lease"}},
		{"another algorithm", func(l *accounting.Limit) { l.Algorithm = accounting.FixedWindow }, []string{"algorithm"}},
		{"leases counting tokens", func(l *accounting.Limit) { l.Dimension = accounting.Tokens }, []string{"algorithm"}},
		{"zero limit", func(l *accounting.Limit) { l.Limit = 0 }, []string{"limit"}},
		{"burst", func(l *accounting.Limit) { l.Burst = 3 }, []string{"burst"}},
		{"no name", func(l *accounting.Limit) { l.Name = "" }, []string{"name"}},
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

// TestConcurrentLimiter: a concurrent limit takes a lease at admission,
// also for a call that is not an LLM call (RequestsOnly), and the
// settlement returns it whatever the usage; the rejection names the
// limit and retries after ConcurrentRetryAfter.
func TestConcurrentLimiter(t *testing.T) {
	l, err := accounting.New(accounting.Options{
		Store: memstore.New(memstore.Options{}),
		Limits: []accounting.Limit{
			{Name: "in-flight", Dimension: accounting.Concurrent, Algorithm: accounting.Leases, Scope: []string{"user"}, Limit: 2, Window: time.Minute},
			{Name: "tpm", Dimension: accounting.Tokens, Scope: []string{"user"}, Limit: 1000, Window: time.Minute},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := accounting.Request{Attributes: accounting.Attributes{{Name: "user", Value: "u"}}, Estimate: accounting.Estimate{InputTokens: 10}}
	a, err := l.Reserve(ctx, req)
	if err != nil || !a.Admitted {
		t.Fatalf("first: %+v, %v", a, err)
	}
	if d := a.Dims[accounting.Concurrent]; !d.Applied || d.Limit != 2 || d.Remaining != 1 {
		t.Errorf("concurrent figures: got %+v, want limit 2, remaining 1", d)
	}
	only := req
	only.RequestsOnly = true
	b, err := l.Reserve(ctx, only)
	if err != nil || !b.Admitted {
		t.Fatalf("second: %+v, %v", b, err)
	}
	c, err := l.Reserve(ctx, req)
	if err != nil || c.Admitted {
		t.Fatalf("third: %+v, %v; want rejected", c, err)
	}
	if c.Trip.Limit.Name != "in-flight" || c.Trip.RetryAfter != accounting.ConcurrentRetryAfter || c.Trip.NeverFits {
		t.Errorf("trip: got %s retry %v never %v, want in-flight, %v, false", c.Trip.Limit.Name, c.Trip.RetryAfter, c.Trip.NeverFits, accounting.ConcurrentRetryAfter)
	}
	if _, err := b.Settle(ctx, accounting.Usage{InputTokens: 10, OutputTokens: 500}); err != nil {
		t.Fatal(err)
	}
	if d, err := l.Reserve(ctx, req); err != nil || !d.Admitted {
		t.Fatalf("after a settlement: %+v, %v; want admitted", d, err)
	}
}
