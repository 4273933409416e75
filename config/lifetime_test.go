package config

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

func TestParseLifetimeLimit(t *testing.T) {
	c := parse(t, `
identity:
  attributes:
    run: {header: x-agent-run-id}
models:
  default: {input: 5, output: 15}
limits:
  - {name: run-steps, dimension: requests, scope: [run], algorithm: lifetime, limit: 50, max_duration: 1h}
  - {name: run-spend, dimension: cost, scope: [run], algorithm: lifetime, limit: 2, max_duration: 2d}
`)
	tests := []struct {
		got  accounting.Limit
		want accounting.Limit
	}{
		{c.Accounting.Limits[0], accounting.Limit{Name: "run-steps", Dimension: accounting.Requests, Algorithm: accounting.Lifetime,
			Limit: 50, Window: time.Hour, OnStoreError: accounting.FailOpen}},
		{c.Accounting.Limits[1], accounting.Limit{Name: "run-spend", Dimension: accounting.Cost, Algorithm: accounting.Lifetime,
			Limit: 2_000_000, Window: 48 * time.Hour, OnStoreError: accounting.FailClosed}},
	}
	for _, tt := range tests {
		g, w := tt.got, tt.want
		if g.Name != w.Name || g.Dimension != w.Dimension || g.Algorithm != w.Algorithm || g.Limit != w.Limit ||
			g.Window != w.Window || g.OnStoreError != w.OnStoreError || len(g.Scope) != 1 || g.Scope[0] != "run" {
			t.Errorf("limit %s: got %+v, want %+v", w.Name, g, w)
		}
	}
}

func TestParseLifetimeLimitErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string
	}{
		{"no max_duration", limitsConfig("{name: a, dimension: requests, algorithm: lifetime, limit: 5}"),
			"config: limits[0].max_duration: required for a lifetime limit (the longest a run may go on, e.g. 1h)"},
		{"a window", limitsConfig("{name: a, dimension: requests, algorithm: lifetime, limit: 5, window: 1h, max_duration: 1h}"),
			"config: limits[0].window: a lifetime limit has no window: max_duration caps the run from its first request"},
		{"max_duration a month", limitsConfig("{name: a, dimension: requests, algorithm: lifetime, limit: 5, max_duration: month}"),
			`config: limits[0].max_duration: "month" is not a duration (e.g. 30m, 2h, 7d)`},
		{"max_duration too long", limitsConfig("{name: a, dimension: requests, algorithm: lifetime, limit: 5, max_duration: 40d}"),
			"config: limits[0].max_duration: 960h0m0s is outside 1s..31d"},
		{"max_duration on a window", limitsConfig("{name: a, dimension: requests, limit: 5, window: 1m, max_duration: 1h}"),
			"config: limits[0].max_duration: only a lifetime limit has a max_duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantParseError(t, tt.config, tt.want)
		})
	}
}
