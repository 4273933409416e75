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
