package main

import (
	"io"
	"os"
	"path/filepath"
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

// TestPrintConfigReserveFor: check-config says what share a limit keeps
// for which tier, and what every other request is held to.
func TestPrintConfigReserveFor(t *testing.T) {
	out := printed(t, `
identity: {attributes: {priority: {header: x-priority}}}
limits:
  - {name: shared-tpm, dimension: tokens, limit: 100000, window: 1m, reserve_for: {attribute: priority, value: interactive, share: 0.3}}
  - {name: shared-slots, dimension: concurrent, limit: 7, reserve_for: {attribute: priority, value: interactive, share: 0.3}}
`)
	for _, want := range []string{
		"  shared-tpm               100000 tokens per minute, global, sliding_window, keeps 30% (30000) for priority=interactive: other requests held to 70000, on store error deny",
		"keeps 30% (3) for priority=interactive: other requests held to 4, on store error allow",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPrintConfigProviderLimit: check-config says which limits the
// provider's answers correct, and where the provider attribute comes
// from.
func TestPrintConfigProviderLimit(t *testing.T) {
	out := printed(t, `
identity: {attributes: {provider: {envoy_attribute: xds.cluster_name}}}
models: {default: {input: 1, output: 1}}
limits:
  - {name: openai-tpm, dimension: tokens, scope: [provider, model], limit: 30000000, window: 1m}
  - {name: openai-spend, dimension: cost, scope: [provider], limit: 100, window: day}
`)
	for _, want := range []string{
		"identity provider from Envoy attribute xds.cluster_name (the filter's request_attributes must list it)",
		"  openai-tpm               30000000 tokens per minute, per provider+model, sliding_window, provider limit (its remaining headers lower it; a provider 429 blocks it for the 429's retry-after, at most 1 minute), on store error deny",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for line := range strings.Lines(out.String()) {
		if strings.Contains(line, "openai-spend") && strings.Contains(line, "provider limit") {
			t.Errorf("a cost limit is shown as corrected by the provider: %s", line)
		}
	}
}

// TestCheckConfigRefusesAProviderLimitAcrossModels: the providers state
// their figures and refuse per model, so a provider limit counting every
// model on one counter would let one model's "0 left" shut out the
// others. check-config refuses it, naming the scope that fixes it.
func TestCheckConfigRefusesAProviderLimitAcrossModels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.yaml")
	if err := os.WriteFile(path, []byte(`
identity: {attributes: {provider: {envoy_attribute: xds.cluster_name}}}
limits:
  - {name: openai-tpm, dimension: tokens, scope: [provider], limit: 30000000, window: 1m}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(t.Context(), []string{"check-config", "-config", path}, nil, io.Discard, io.Discard)
	want := "limits[0].scope: a provider limit is corrected by the provider's figures and 429s, which are per model: write scope: [provider, model] (or match one model)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("check-config: got %v, want an error containing %q", err, want)
	}
}
