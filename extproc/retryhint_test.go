package extproc

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

func TestShouldRetry(t *testing.T) {
	lim := &accounting.Limit{Name: "l", Dimension: accounting.Tokens, Limit: 10, Window: time.Hour}
	tests := []struct {
		name    string
		trip    accounting.Trip
		maxWait time.Duration
		want    bool
	}{
		{"short wait, default", accounting.Trip{RetryAfter: 2 * time.Second}, 0, true},
		{"a sliding minute's first refusal, default", accounting.Trip{RetryAfter: 65730 * time.Millisecond}, 0, true},
		{"two minutes exactly, default", accounting.Trip{RetryAfter: 2 * time.Minute}, 0, true},
		{"past two minutes, default", accounting.Trip{RetryAfter: 2*time.Minute + time.Millisecond}, 0, false},
		{"an hour, default", accounting.Trip{RetryAfter: time.Hour}, 0, false},
		{"an hour under a two-hour max", accounting.Trip{RetryAfter: time.Hour}, 2 * time.Hour, true},
		{"past a ten-second max", accounting.Trip{RetryAfter: 11 * time.Second}, 10 * time.Second, false},
		{"a day, never too long", accounting.Trip{RetryAfter: 24 * time.Hour}, -1, true},
		{"never fits", accounting.Trip{NeverFits: true}, 0, false},
		{"never fits, never too long", accounting.Trip{NeverFits: true}, -1, false},
		{"run over", accounting.Trip{Final: true}, 0, false},
		{"run over, never too long", accounting.Trip{Final: true, RetryAfter: time.Second}, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.trip.Limit = lim
			if got := shouldRetry(&tt.trip, tt.maxWait); got != tt.want {
				t.Errorf("shouldRetry(RetryAfter %s, max %s): got %v, want %v", tt.trip.RetryAfter, tt.maxWait, got, tt.want)
			}
		})
	}
}

func TestResetAt(t *testing.T) {
	now := time.Date(2026, 12, 1, 13, 59, 30, 250_000_000, time.FixedZone("CET", 3600))
	tests := []struct {
		name  string
		after time.Duration
		want  string
	}{
		{"to the next whole second", 30*time.Second - 250*time.Millisecond, "2026-12-01T13:00:00Z"},
		{"a millisecond past a second rounds up", 30*time.Second - 249*time.Millisecond, "2026-12-01T13:00:01Z"},
		{"an hour and a fraction", time.Hour + 100*time.Millisecond, "2026-12-01T13:59:31Z"},
		{"now, on a fraction", 0, "2026-12-01T12:59:31Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resetAt(tt.after, now).Format(time.RFC3339)
			if got != tt.want {
				t.Errorf("resetAt(now+%s): got %s, want %s", tt.after, got, tt.want)
			}
		})
	}
}
