package config

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
)

func TestParseLimitFrom(t *testing.T) {
	const attrs = "identity:\n  attributes:\n    tenant: {header: x-tenant-id}\n    tpm: {metadata: {namespace: envoy.filters.http.jwt_authn, key: payload, path: [tpm]}}\n    budget: {header: x-budget}\n" +
		"models: {default: {input: 5, output: 15}}\n"
	tests := []struct {
		name  string
		limit string
		want  accounting.Limit // only Limit and From are compared
		err   string
	}{
		{"tokens", "{name: a, dimension: tokens, scope: [tenant], limit: 100000, window: 1m, limit_from: {attribute: tpm, ceiling: 2000000}}",
			accounting.Limit{Limit: 100000, From: &accounting.LimitFrom{Attribute: "tpm", Ceiling: 2000000}}, ""},
		{"cost in USD", "{name: a, dimension: cost, scope: [tenant], algorithm: fixed_window, limit: 50, window: month, limit_from: {attribute: budget, ceiling: 5000.5}}",
			accounting.Limit{Limit: 50_000_000, From: &accounting.LimitFrom{Attribute: "budget", Ceiling: 5_000_500_000}}, ""},
		{"token bucket", "{name: a, dimension: tokens, scope: [tenant], algorithm: token_bucket, limit: 10, window: 1m, limit_from: {attribute: tpm, ceiling: 20}}",
			accounting.Limit{Limit: 10, From: &accounting.LimitFrom{Attribute: "tpm", Ceiling: 20}}, ""},
		{"unknown attribute", "{name: a, dimension: tokens, limit: 1, window: 1m, limit_from: {attribute: rpm, ceiling: 5}}",
			accounting.Limit{}, `config: limits[0].limit_from.attribute: "rpm" has no source under identity.attributes`},
		{"no attribute", "{name: a, dimension: tokens, limit: 1, window: 1m, limit_from: {ceiling: 5}}",
			accounting.Limit{}, "config: limits[0].limit_from.attribute: required"},
		{"no ceiling", "{name: a, dimension: tokens, limit: 1, window: 1m, limit_from: {attribute: tpm}}",
			accounting.Limit{}, "config: limits[0].limit_from.ceiling: must be positive"},
		{"fractional ceiling", "{name: a, dimension: tokens, limit: 1, window: 1m, limit_from: {attribute: tpm, ceiling: 2.5}}",
			accounting.Limit{}, "config: limits[0].limit_from.ceiling: 2.5 must be a whole number of tokens"},
		{"default above the ceiling", "{name: a, dimension: tokens, limit: 10, window: 1m, limit_from: {attribute: tpm, ceiling: 5}}",
			accounting.Limit{}, "config: limits[0].limit: 10 is above limit_from.ceiling 5: the value for requests without the attribute must be one the attribute could give"},
		{"burst", "{name: a, dimension: tokens, algorithm: token_bucket, limit: 1, burst: 2, window: 1m, limit_from: {attribute: tpm, ceiling: 5}}",
			accounting.Limit{}, "config: limits[0].burst: a limit with limit_from takes its capacity from the attribute; burst must be unset"},
		{"unknown key", "{name: a, dimension: tokens, limit: 1, window: 1m, limit_from: {attribute: tpm, ceiling: 5, default: 3}}",
			accounting.Limit{}, "config: limits[0].limit_from.default: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(attrs + "limits:\n  - " + tt.limit + "\n"))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("got  %v\nwant %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := c.Accounting.Limits[0]
			if got.Limit != tt.want.Limit || got.From == nil || *got.From != *tt.want.From {
				t.Errorf("got limit %d from %+v, want %d from %+v", got.Limit, got.From, tt.want.Limit, tt.want.From)
			}
		})
	}
}
