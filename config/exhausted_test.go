package config

import "testing"

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
