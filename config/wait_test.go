package config

import (
	"testing"
	"time"
)

func TestParseWaitUpTo(t *testing.T) {
	c := parse(t, limitsConfig(
		"{name: rps, dimension: requests, algorithm: sliding_window, limit: 10, window: 1s, on_exhausted: {wait_up_to: 2s}}",
		"{name: tpm, dimension: requests, limit: 10, window: 1m}"))
	if got := c.Accounting.Limits[0].WaitUpTo; got != 2*time.Second {
		t.Errorf("rps: wait %v, want 2s", got)
	}
	if got := c.Accounting.Limits[1].WaitUpTo; got != 0 {
		t.Errorf("tpm: wait %v, want none", got)
	}
}

func TestParseWaitUpToErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string
	}{
		{"not a duration", limitsConfig("{name: a, dimension: requests, limit: 5, window: 1s, on_exhausted: {wait_up_to: 2}}"),
			`config: limits[0].on_exhausted.wait_up_to: "2" is not a duration (e.g. 2s, 500ms)`},
		{"too long", limitsConfig("{name: a, dimension: requests, limit: 5, window: 1m, on_exhausted: {wait_up_to: 11s}}"),
			"config: limits[0].on_exhausted.wait_up_to: 11s is above the longest wait, 10s (Envoy's max_message_timeout must cover the wait plus 1s)"},
		{"negative", limitsConfig("{name: a, dimension: requests, limit: 5, window: 1s, on_exhausted: {wait_up_to: -1s}}"),
			"config: limits[0].on_exhausted.wait_up_to: must not be negative"},
		{"a lifetime budget", limitsConfig("{name: a, dimension: requests, algorithm: lifetime, limit: 5, max_duration: 1h, on_exhausted: {wait_up_to: 1s}}"),
			"config: limits[0].on_exhausted.wait_up_to: a lifetime budget never frees: waiting cannot help"},
		{"unknown key", limitsConfig("{name: a, dimension: requests, limit: 5, window: 1s, on_exhausted: {wait: 1s}}"),
			"config: limits[0].on_exhausted.wait: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.config))
			got := "<nil>"
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
