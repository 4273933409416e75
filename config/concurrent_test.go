package config

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

func TestParseConcurrentLimit(t *testing.T) {
	c := parse(t, limitsConfig(
		"{name: in-flight, dimension: concurrent, scope: [tenant], limit: 4, lease: 10m}",
		"{name: global, dimension: concurrent, limit: 100}",
	))
	tests := []struct {
		got  accounting.Limit
		want accounting.Limit
	}{
		{c.Accounting.Limits[0], accounting.Limit{Name: "in-flight", Dimension: accounting.Concurrent, Algorithm: accounting.Leases,
			Scope: []string{"tenant"}, Limit: 4, Window: 10 * time.Minute, OnStoreError: accounting.FailOpen}},
		{c.Accounting.Limits[1], accounting.Limit{Name: "global", Dimension: accounting.Concurrent, Algorithm: accounting.Leases,
			Limit: 100, Window: accounting.DefaultLease, OnStoreError: accounting.FailOpen}},
	}
	for _, tt := range tests {
		g, w := tt.got, tt.want
		if g.Name != w.Name || g.Dimension != w.Dimension || g.Algorithm != w.Algorithm || g.Limit != w.Limit ||
			g.Window != w.Window || g.OnStoreError != w.OnStoreError || len(g.Scope) != len(w.Scope) {
			t.Errorf("limit %s: got %+v, want %+v", w.Name, g, w)
		}
	}
}

func TestParseConcurrentLimitErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string
	}{
		{"a window", limitsConfig("{name: a, dimension: concurrent, limit: 2, window: 1m}"),
			"config: limits[0].window: a concurrent limit has no window (its lease bounds a request that never settles)"},
		{"an algorithm", limitsConfig("{name: a, dimension: concurrent, limit: 2, algorithm: fixed_window}"),
			"config: limits[0].algorithm: a concurrent limit counts requests in flight; it takes no algorithm"},
		{"lease not a duration", limitsConfig("{name: a, dimension: concurrent, limit: 2, lease: forever}"),
			`config: limits[0].lease: "forever" is not a duration (e.g. 10m)`},
		{"lease too long", limitsConfig("{name: a, dimension: concurrent, limit: 2, lease: 2h}"),
			"config: limits[0].lease: 2h0m0s is outside 1s..1h0m0s"},
		{"lease on another limit", limitsConfig("{name: a, dimension: tokens, limit: 2, window: 1m, lease: 1m}"),
			"config: limits[0].lease: only a concurrent limit has a lease"},
		{"fractional limit", limitsConfig("{name: a, dimension: concurrent, limit: 2.5}"),
			"config: limits[0].limit: 2.5 must be a whole number of requests in flight"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantParseError(t, tt.config, tt.want)
		})
	}
}
