package main

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/config"
)

// TestPrintConfigLimitFrom: check-config says where a per-request limit
// value comes from, its ceiling and the value without one.
func TestPrintConfigLimitFrom(t *testing.T) {
	cfg, err := config.Parse([]byte(`
identity: {attributes: {tenant: {header: x-tenant}, tpm: {header: x-tpm}}}
limits:
  - {name: contract-tpm, dimension: tokens, scope: [tenant], limit: 100000, window: 1m, limit_from: {attribute: tpm, ceiling: 2000000}}
`))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printConfig(&out, cfg)
	want := "  contract-tpm             100000 tokens per minute, per tenant, sliding_window, per request from attribute tpm up to 2000000 (100000 when absent or unusable), on store error deny"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

// TestPrintConfigReserveFor: check-config says what share a limit keeps
// for which tier, and what every other request is held to.
func TestPrintConfigReserveFor(t *testing.T) {
	cfg, err := config.Parse([]byte(`
identity: {attributes: {priority: {header: x-priority}}}
limits:
  - {name: shared-tpm, dimension: tokens, limit: 100000, window: 1m, reserve_for: {attribute: priority, value: interactive, share: 0.3}}
  - {name: shared-slots, dimension: concurrent, limit: 7, reserve_for: {attribute: priority, value: interactive, share: 0.3}}
`))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printConfig(&out, cfg)
	for _, want := range []string{
		"  shared-tpm               100000 tokens per minute, global, sliding_window, keeps 30% (30000) for priority=interactive: other requests held to 70000, on store error deny",
		"keeps 30% (3) for priority=interactive: other requests held to 4, on store error allow",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
