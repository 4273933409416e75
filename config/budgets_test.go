package config

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
)

func TestParseLimitMode(t *testing.T) {
	tests := []struct {
		name    string
		limit   string
		want    accounting.Mode
		wantErr string
	}{
		{"absent", "{name: a, dimension: tokens, limit: 1, window: 1m}", accounting.Enforce, ""},
		{"enforce", "{name: a, dimension: tokens, limit: 1, window: 1m, mode: enforce}", accounting.Enforce, ""},
		{"shadow", "{name: a, dimension: tokens, limit: 1, window: 1m, mode: shadow}", accounting.Shadow, ""},
		{"unknown", "{name: a, dimension: tokens, limit: 1, window: 1m, mode: dry_run}", 0,
			`config: limits[0].mode: unknown mode "dry_run" (want enforce or shadow)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(limitsConfig(tt.limit)))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Accounting.Limits[0].Mode; got != tt.want {
				t.Errorf("mode: got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseTimeZone(t *testing.T) {
	tests := []struct {
		name         string
		limit        string
		wantCalendar accounting.Calendar
		wantZone     string // "" for none (UTC)
		wantErr      string
	}{
		{"day in Berlin", "{name: a, dimension: tokens, algorithm: fixed_window, limit: 1, window: day, time_zone: Europe/Berlin}",
			accounting.CalendarDay, "Europe/Berlin", ""},
		{"month in New York", "{name: a, dimension: tokens, algorithm: fixed_window, limit: 1, window: month, time_zone: America/New_York}",
			accounting.CalendarMonth, "America/New_York", ""},
		{"UTC keeps the UTC day", "{name: a, dimension: tokens, algorithm: fixed_window, limit: 1, window: day, time_zone: UTC}",
			accounting.NoCalendar, "", ""},
		{"no zone", "{name: a, dimension: tokens, algorithm: fixed_window, limit: 1, window: day}", accounting.NoCalendar, "", ""},
		{"unknown zone", "{name: a, dimension: tokens, algorithm: fixed_window, limit: 1, window: day, time_zone: Mars/Olympus}", 0, "",
			`config: limits[0].time_zone: "Mars/Olympus" is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)`},
		{"Local", "{name: a, dimension: tokens, algorithm: fixed_window, limit: 1, window: day, time_zone: Local}", 0, "",
			`config: limits[0].time_zone: "Local" depends on the machine; name the zone (e.g. Europe/Berlin)`},
		{"not a calendar window", "{name: a, dimension: tokens, limit: 1, window: 24h, time_zone: Europe/Berlin}", 0, "",
			`config: limits[0].time_zone: only a day or month window follows a time zone, not "24h"`},
		{"a concurrent limit", "{name: a, dimension: concurrent, limit: 2, time_zone: Europe/Berlin}", 0, "",
			"config: limits[0].time_zone: a concurrent limit has no calendar (it counts requests in flight); only a day or month window follows a time zone"},
		{"a lifetime limit", "{name: a, dimension: requests, algorithm: lifetime, limit: 5, max_duration: 1h, time_zone: Europe/Berlin}", 0, "",
			"config: limits[0].time_zone: a lifetime limit has no calendar (its run starts at its first request); only a day or month window follows a time zone"},
		{"a sliding day", "{name: a, dimension: tokens, algorithm: sliding_window, limit: 1, window: day, time_zone: Europe/Berlin}", 0, "",
			"config: limits[0].window: a calendar day needs algorithm fixed_window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(limitsConfig(tt.limit)))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l := c.Accounting.Limits[0]
			zone := ""
			if l.Location != nil {
				zone = l.Location.String()
			}
			if l.Calendar != tt.wantCalendar || zone != tt.wantZone {
				t.Errorf("got calendar %v, zone %q; want %v, %q", l.Calendar, zone, tt.wantCalendar, tt.wantZone)
			}
		})
	}
}
