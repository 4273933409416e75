package accounting

import (
	"strings"
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestCalendarWindowsInATimeZone pins the windows of calendar days and
// months in a time zone, across daylight-saving changes.
func TestCalendarWindowsInATimeZone(t *testing.T) {
	berlin, newYork := mustZone(t, "Europe/Berlin"), mustZone(t, "America/New_York")
	tests := []struct {
		name      string
		cal       Calendar
		loc       *time.Location
		at        time.Time
		wantStart time.Time
		wantLen   time.Duration
	}{
		{"Berlin spring forward: a 23-hour day", CalendarDay, berlin,
			time.Date(2026, 3, 29, 12, 0, 0, 0, berlin), time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC), 23 * time.Hour},
		{"Berlin fall back: a 25-hour day", CalendarDay, berlin,
			time.Date(2026, 10, 25, 12, 0, 0, 0, berlin), time.Date(2026, 10, 24, 22, 0, 0, 0, time.UTC), 25 * time.Hour},
		{"Berlin, the day before the change", CalendarDay, berlin,
			time.Date(2026, 3, 28, 23, 59, 59, 0, berlin), time.Date(2026, 3, 27, 23, 0, 0, 0, time.UTC), 24 * time.Hour},
		{"Berlin, the first instant of the short day", CalendarDay, berlin,
			time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC), time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC), 23 * time.Hour},
		{"Berlin, the last microsecond of the long day", CalendarDay, berlin,
			time.Date(2026, 10, 25, 22, 59, 59, 999999000, time.UTC), time.Date(2026, 10, 24, 22, 0, 0, 0, time.UTC), 25 * time.Hour},
		{"Berlin, March: 31 days less an hour", CalendarMonth, berlin,
			time.Date(2026, 3, 15, 0, 0, 0, 0, berlin), time.Date(2026, 2, 28, 23, 0, 0, 0, time.UTC), 31*24*time.Hour - time.Hour},
		{"New York, a month boundary: the last second of October", CalendarMonth, newYork,
			time.Date(2026, 11, 1, 3, 59, 59, 0, time.UTC), time.Date(2026, 10, 1, 4, 0, 0, 0, time.UTC), 31 * 24 * time.Hour},
		{"New York, the first instant of November: 30 days and the hour clocks go back", CalendarMonth, newYork,
			time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC), 30*24*time.Hour + time.Hour},
		{"UTC calendar day", CalendarDay, nil,
			time.Date(2026, 3, 29, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Counter{Algorithm: FixedWindow, Calendar: tt.cal, Location: tt.loc}
			idx, end := FixedWindowAt(&c, tt.at.UnixMicro())
			if got := time.UnixMicro(idx).UTC(); !got.Equal(tt.wantStart) {
				t.Errorf("start: got %v, want %v", got, tt.wantStart)
			}
			if got := time.Duration(end-idx) * time.Microsecond; got != tt.wantLen {
				t.Errorf("length: got %v, want %v", got, tt.wantLen)
			}
			b := ZoneBounds(&c, tt.at.UnixMicro())
			if b[1] != idx || b[2] != end || !(b[0] < b[1] && b[2] < b[3]) {
				t.Errorf("ZoneBounds: got %v, want [_, %d, %d, _] increasing", b, idx, end)
			}
			// The previous window ends where this one starts, and the
			// next starts where it ends.
			if prev, prevEnd := FixedWindowAt(&c, b[1]-1); prev != b[0] || prevEnd != b[1] {
				t.Errorf("the window before: got [%d, %d), want [%d, %d)", prev, prevEnd, b[0], b[1])
			}
			if next, nextEnd := FixedWindowAt(&c, b[2]); next != b[2] || nextEnd != b[3] {
				t.Errorf("the window after: got [%d, %d), want [%d, %d)", next, nextEnd, b[2], b[3])
			}
		})
	}
}

// TestUTCMonthKeepsItsIndex pins that a UTC calendar month is indexed as
// before time zones (year*12 + month - 1) under the same key, so that a
// counter kept by an earlier version stays in its window.
func TestUTCMonthKeepsItsIndex(t *testing.T) {
	for _, loc := range []*time.Location{nil, time.UTC} {
		l := Limit{Name: "m", Algorithm: FixedWindow, Calendar: CalendarMonth, Limit: 1, Location: loc}
		c := l.Counter(nil)
		idx, _ := FixedWindowAt(&c, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
		if want := int64(2026*12 + 11); idx != want {
			t.Errorf("location %v: index got %d, want %d", loc, idx, want)
		}
		if c.Key != "tw2:fm:1:m" {
			t.Errorf("location %v: key got %q, want tw2:fm:1:m", loc, c.Key)
		}
	}
}

func TestZonedKeysDiffer(t *testing.T) {
	berlin, newYork := mustZone(t, "Europe/Berlin"), mustZone(t, "America/New_York")
	seen := map[string]string{}
	for _, tc := range []struct {
		name string
		l    Limit
	}{
		{"utc day", Limit{Name: "d", Algorithm: FixedWindow, Window: 24 * time.Hour, Limit: 1}},
		{"berlin day", Limit{Name: "d", Algorithm: FixedWindow, Calendar: CalendarDay, Window: 24 * time.Hour, Limit: 1, Location: berlin}},
		{"new york day", Limit{Name: "d", Algorithm: FixedWindow, Calendar: CalendarDay, Window: 24 * time.Hour, Limit: 1, Location: newYork}},
		{"berlin month", Limit{Name: "d", Algorithm: FixedWindow, Calendar: CalendarMonth, Limit: 1, Location: berlin}},
		{"utc month", Limit{Name: "d", Algorithm: FixedWindow, Calendar: CalendarMonth, Limit: 1}},
	} {
		key := CounterKey(&tc.l, nil)
		if other, ok := seen[key]; ok {
			t.Errorf("%s and %s share the key %q", tc.name, other, key)
		}
		seen[key] = tc.name
		if tc.l.Location != nil && !strings.Contains(key, "@"+tc.l.Location.String()+":") {
			t.Errorf("%s: key %q does not name its zone", tc.name, key)
		}
	}
}

func TestValidateTimeZone(t *testing.T) {
	berlin := mustZone(t, "Europe/Berlin")
	tests := []struct {
		name string
		l    Limit
		want string // "" for valid
	}{
		{"day in a zone", Limit{Name: "a", Algorithm: FixedWindow, Calendar: CalendarDay, Window: 24 * time.Hour, Limit: 1, Location: berlin}, ""},
		{"month in a zone", Limit{Name: "a", Algorithm: FixedWindow, Calendar: CalendarMonth, Limit: 1, Location: berlin}, ""},
		{"sliding day", Limit{Name: "a", Algorithm: SlidingWindow, Calendar: CalendarDay, Window: 24 * time.Hour, Limit: 1, Location: berlin},
			"window: a calendar day needs algorithm fixed_window"},
		{"hour in a zone", Limit{Name: "a", Algorithm: FixedWindow, Window: time.Hour, Limit: 1, Location: berlin},
			"time_zone: only a calendar window (day or month) has a time zone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.l.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}
