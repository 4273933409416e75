package config

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

func TestParseOnExhausted(t *testing.T) {
	c := parse(t, limitsConfig(
		"{name: 4o, dimension: requests, scope: [tenant], limit: 10, window: 1m, match: {model: gpt-4o}, on_exhausted: {downgrade_to: gpt-4o-mini}}",
		"{name: plain, dimension: requests, scope: [tenant], limit: 10, window: 1m}",
	))
	if got := c.Accounting.Limits[0].OnExhausted.DowngradeTo; got != "gpt-4o-mini" {
		t.Errorf("limits[0] downgrade_to: got %q, want gpt-4o-mini", got)
	}
	if got := c.Accounting.Limits[1].OnExhausted.DowngradeTo; got != "" {
		t.Errorf("limits[1] downgrade_to: got %q, want none", got)
	}
}

func TestParseOnExhaustedErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string
	}{
		{"no match.model", limitsConfig("{name: a, dimension: requests, limit: 2, window: 1m, on_exhausted: {downgrade_to: gpt-4o-mini}}"),
			"config: limits[0].on_exhausted.downgrade_to: needs match.model, the model the limit downgrades from: a limit on every model would refuse the fallback too"},
		{"a cycle", limitsConfig(
			"{name: a, dimension: requests, limit: 2, window: 1m, match: {model: gpt-4o}, on_exhausted: {downgrade_to: gpt-4o-mini}}",
			"{name: b, dimension: requests, limit: 2, window: 1m, match: {model: gpt-4o-mini}, on_exhausted: {downgrade_to: gpt-4o}}"),
			"config: limits[0].on_exhausted.downgrade_to: gpt-4o -> gpt-4o-mini -> gpt-4o is a cycle\n" +
				"config: limits[1].on_exhausted.downgrade_to: gpt-4o-mini -> gpt-4o -> gpt-4o-mini is a cycle"},
		{"an unknown key", limitsConfig("{name: a, dimension: requests, limit: 2, window: 1m, match: {model: gpt-4o}, on_exhausted: {downgrade: gpt-4o-mini}}"),
			"config: limits[0].on_exhausted.downgrade: unknown field"},
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

func TestParseWaitUpTo(t *testing.T) {
	c := parse(t, limitsConfig(
		"{name: rps, dimension: requests, algorithm: sliding_window, limit: 10, window: 1s, on_exhausted: {wait_up_to: 2s}}",
		"{name: tpm, dimension: requests, limit: 10, window: 1m}"))
	if got := c.Accounting.Limits[0].OnExhausted.WaitUpTo; got != 2*time.Second {
		t.Errorf("rps: wait %v, want 2s", got)
	}
	if got := c.Accounting.Limits[1].OnExhausted.WaitUpTo; got != 0 {
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

func TestParseOnExhaustedBoth(t *testing.T) {
	c := parse(t, limitsConfig(
		"{name: 4o, dimension: requests, scope: [tenant], limit: 10, window: 1s, match: {model: gpt-4o}, on_exhausted: {wait_up_to: 500ms, downgrade_to: gpt-4o-mini}}"))
	got := c.Accounting.Limits[0].OnExhausted
	want := accounting.OnExhausted{WaitUpTo: 500 * time.Millisecond, DowngradeTo: "gpt-4o-mini"}
	if got != want {
		t.Errorf("on_exhausted: got %+v, want %+v", got, want)
	}
}
