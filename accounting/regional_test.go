package accounting_test

import (
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
