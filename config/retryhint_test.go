package config

import (
	"testing"
	"time"
)

func TestParseShouldRetryMax(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		want    time.Duration
		wantErr string
	}{
		{"default", "", 2 * time.Minute, ""},
		{"five minutes", "rate_limit_headers: {should_retry_max: 5m}\n", 5 * time.Minute, ""},
		{"off", "rate_limit_headers: {should_retry_max: \"off\"}\n", -1, ""},
		{"not a duration", "rate_limit_headers: {should_retry_max: soon}\n", 0,
			`config: rate_limit_headers.should_retry_max: "soon" is not a duration (e.g. 60s, 5m) or off`},
		{"zero", "rate_limit_headers: {should_retry_max: 0s}\n", 0,
			"config: rate_limit_headers.should_retry_max: 0s is outside 1s..31d (off never says not to retry)"},
		{"past a month", "rate_limit_headers: {should_retry_max: 800h}\n", 0,
			"config: rate_limit_headers.should_retry_max: 800h is outside 1s..31d (off never says not to retry)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(baseConfig + tt.config))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := c.Server.ShouldRetryMax; got != tt.want {
				t.Errorf("ShouldRetryMax: got %s, want %s", got, tt.want)
			}
		})
	}
}
