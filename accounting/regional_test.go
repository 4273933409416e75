package accounting_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

func TestAcrossRegionsValidate(t *testing.T) {
	month := accounting.Limit{
		Name: "company", Dimension: accounting.Cost, Algorithm: accounting.FixedWindow,
		Calendar: accounting.CalendarMonth, Limit: 50_000_000_000, AcrossRegions: true,
	}
	tests := []struct {
		name   string
		change func(l *accounting.Limit)
		want   []string
	}{
		{"calendar month", func(*accounting.Limit) {}, nil},
		{"calendar day", func(l *accounting.Limit) { l.Calendar = accounting.CalendarDay }, nil},
		{"fixed window", func(l *accounting.Limit) { l.Calendar, l.Window = accounting.NoCalendar, time.Hour }, nil},
		{"sliding window", func(l *accounting.Limit) {
			l.Algorithm, l.Calendar, l.Window = accounting.SlidingWindow, accounting.NoCalendar, time.Hour
		}, []string{"across_regions"}},
		{"token bucket", func(l *accounting.Limit) {
			l.Algorithm, l.Calendar, l.Window = accounting.TokenBucket, accounting.NoCalendar, time.Hour
		}, []string{"across_regions"}},
		{"scoped", func(l *accounting.Limit) { l.Scope = []string{"tenant"} }, []string{"across_regions"}},
		{"limit from an attribute", func(l *accounting.Limit) {
			l.From = &accounting.LimitFrom{Attribute: "budget", Ceiling: 1}
		}, []string{"across_regions"}},
		{"shadow", func(l *accounting.Limit) { l.Mode = accounting.Shadow }, []string{"across_regions"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := month
			tt.change(&l)
			got := fields(t, l.Validate())
			// Only the across_regions fields matter here; a change may
			// trip the limit's own checks too.
			var across []string
			for _, f := range got {
				if f == "across_regions" {
					across = append(across, f)
				}
			}
			if len(across) > 1 {
				across = across[:1]
			}
			if strings.Join(across, " ") != strings.Join(tt.want, " ") {
				t.Errorf("fields: got %q, want %q (error: %v)", got, tt.want, l.Validate())
			}
		})
	}
}

func TestAcrossRegionsNeedsRegions(t *testing.T) {
	lim := accounting.Limit{
		Name: "company", Dimension: accounting.Tokens, Algorithm: accounting.FixedWindow,
		Calendar: accounting.CalendarMonth, Limit: 1000, AcrossRegions: true,
	}
	_, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{}), Limits: []accounting.Limit{lim}})
	if got := fields(t, err); strings.Join(got, " ") != "limits[0].across_regions" {
		t.Errorf("New without Regional: got fields %q (error %v), want limits[0].across_regions", got, err)
	}
}

// fakeRegion is a region whose cap the test sets: Grow raises it by
// grant, or moves it to the store's window (mark), as a region would.
type fakeRegion struct {
	cap, mark int64
	grant     int64
	grows     int
}

func (f *fakeRegion) Cap(*accounting.Counter) (int64, int64) { return f.cap, f.mark }

func (f *fakeRegion) Grow(_ context.Context, c *accounting.Counter, amount, _ int64) bool {
	f.grows++
	if c.Limit != 1000 {
		panic("Grow got the cap for the limit, want the global limit")
	}
	f.cap += f.grant
	f.mark = monthMark
	return f.grant > 0
}

// monthMark is the mark of March 2026, the month the tests run in.
const monthMark = 2026*12 + 2

func TestReserveUnderRegionCap(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	lim := accounting.Limit{
		Name: "company", Dimension: accounting.Tokens, Algorithm: accounting.FixedWindow,
		Calendar: accounting.CalendarMonth, Limit: 1000, AcrossRegions: true,
	}
	tests := []struct {
		name         string
		region       fakeRegion
		amount       int64
		wantAdmitted bool
		wantGrows    int
		wantNever    bool
		wantUsed     int64 // on the store once releases landed
	}{
		{"within the cap", fakeRegion{cap: 100, mark: monthMark}, 50, true, 0, false, 50},
		{"past the cap, the region grows", fakeRegion{cap: 100, mark: monthMark, grant: 500}, 300, true, 1, false, 300},
		{"past the cap, nothing free", fakeRegion{cap: 100, mark: monthMark}, 300, false, 1, false, 0},
		{"past the global limit", fakeRegion{cap: 100, mark: monthMark}, 1001, false, 1, true, 0},
		{"a cap of last month", fakeRegion{cap: 500, mark: monthMark - 1}, 300, true, 1, false, 300},
		{"nothing, before any cap", fakeRegion{cap: 0, mark: math.MinInt64}, 0, true, 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memstore.New(memstore.Options{Now: func() time.Time { return now }})
			region := tt.region
			l, err := accounting.New(accounting.Options{Store: store, Limits: []accounting.Limit{lim}, Regional: &region})
			if err != nil {
				t.Fatal(err)
			}
			r, err := l.Reserve(context.Background(), accounting.Request{
				Attributes: accounting.Attributes{{Name: "model", Value: "m"}}, Model: "m",
				Estimate: accounting.Estimate{InputTokens: tt.amount},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if r.Admitted != tt.wantAdmitted || region.grows != tt.wantGrows || (!r.Admitted && r.Trip.NeverFits != tt.wantNever) {
				t.Errorf("got admitted %v after %d grows (never fits %v), want %v after %d (never fits %v)",
					r.Admitted, region.grows, r.Trip.NeverFits, tt.wantAdmitted, tt.wantGrows, tt.wantNever)
			}
			c := lim.Counter(accounting.Attributes{{Name: "model", Value: "m"}})
			u, err := store.Peek(context.Background(), []accounting.Counter{c})
			if err != nil {
				t.Fatal(err)
			}
			if u[0].Used != tt.wantUsed {
				t.Errorf("the store holds %d used, want %d (a reservation under last month's cap released)", u[0].Used, tt.wantUsed)
			}
		})
	}
}
