package accounting

import (
	"testing"
	"time"
)

// TestShadowLogRateLimit pins the would-reject log's rate: the first line
// at once, then at most one per ShadowLogEvery, counting those it left
// out.
func TestShadowLogRateLimit(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		name           string
		at             time.Duration
		wantLogged     bool
		wantSuppressed int64
	}{
		{"first", 0, true, 0},
		{"right after", time.Second, false, 0},
		{"just before the next", ShadowLogEvery - time.Nanosecond, false, 0},
		{"the next", ShadowLogEvery, true, 2},
		{"long after", time.Hour, true, 0},
	}
	var s shadowLog
	for _, step := range steps {
		logged, suppressed := s.allow(start.Add(step.at))
		if logged != step.wantLogged || suppressed != step.wantSuppressed {
			t.Errorf("%s: got logged %v, %d not logged, want %v, %d", step.name, logged, suppressed, step.wantLogged, step.wantSuppressed)
		}
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{"", Enforce, false},
		{"enforce", Enforce, false},
		{"shadow", Shadow, false},
		{"dry-run", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseMode(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseMode(%q): got %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil && tt.in != "" && got.String() != tt.in {
			t.Errorf("%v.String(): got %q, want %q", got, got.String(), tt.in)
		}
	}
}
