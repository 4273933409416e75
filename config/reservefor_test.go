package config

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
)

func TestParseReserveFor(t *testing.T) {
	const attrs = "identity:\n  attributes:\n    tenant: {header: x-tenant-id}\n    priority: {header: x-priority}\n"
	tests := []struct {
		name  string
		limit string
		want  *accounting.ReserveFor
		err   string
	}{
		{"tokens", "{name: a, dimension: tokens, limit: 100000, window: 1m, reserve_for: {attribute: priority, value: interactive, share: 0.3}}",
			&accounting.ReserveFor{Attribute: "priority", Value: "interactive", Share: 0.3}, ""},
		{"concurrent", "{name: a, dimension: concurrent, limit: 10, reserve_for: {attribute: priority, value: interactive, share: 0.2}}",
			&accounting.ReserveFor{Attribute: "priority", Value: "interactive", Share: 0.2}, ""},
		{"unknown attribute", "{name: a, dimension: tokens, limit: 10, window: 1m, reserve_for: {attribute: tier, value: gold, share: 0.5}}",
			nil, `config: limits[0].reserve_for.attribute: "tier" has no source under identity.attributes (and is not model or api)`},
		{"share out of range", "{name: a, dimension: tokens, limit: 10, window: 1m, reserve_for: {attribute: priority, value: interactive, share: 30}}",
			nil, "config: limits[0].reserve_for.share: 30 is not in (0, 1)"},
		{"no value", "{name: a, dimension: tokens, limit: 10, window: 1m, reserve_for: {attribute: priority, share: 0.3}}",
			nil, "config: limits[0].reserve_for.value: required"},
		{"token bucket", "{name: a, dimension: tokens, algorithm: token_bucket, limit: 10, window: 1m, reserve_for: {attribute: priority, value: interactive, share: 0.3}}",
			nil, "config: limits[0].reserve_for: a token_bucket cannot keep a share: its state is the tokens left, which a smaller capacity for one tier would cut for both"},
		{"unknown key", "{name: a, dimension: tokens, limit: 10, window: 1m, reserve_for: {attribute: priority, value: interactive, share: 0.3, min: 1}}",
			nil, "config: limits[0].reserve_for.min: unknown field"},
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
			if got := c.Accounting.Limits[0].ReserveFor; got == nil || *got != *tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
