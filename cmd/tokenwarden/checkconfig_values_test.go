package main

import (
	"strings"
	"testing"
)

// TestPrintConfigLimitFrom: check-config says where a per-request limit
// value comes from, its ceiling and the value without one.
func TestPrintConfigLimitFrom(t *testing.T) {
	out := printed(t, `
identity: {attributes: {tenant: {header: x-tenant}, tpm: {header: x-tpm}}}
limits:
  - {name: contract-tpm, dimension: tokens, scope: [tenant], limit: 100000, window: 1m, limit_from: {attribute: tpm, ceiling: 2000000}}
`)
	want := "  contract-tpm             100000 tokens per minute, per tenant, sliding_window, per request from attribute tpm up to 2000000 (100000 when absent or unusable), on store error deny"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}
