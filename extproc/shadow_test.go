package extproc_test

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
)

// TestShadowLimitThroughEnvoy sends requests through the test Envoy past
// a shadow limit: one it would reject is admitted, charged nothing on the
// shadow counter, kept out of the headers and named in the access-log
// metadata; one it would admit is charged and settled on it like on the
// enforced limit.
func TestShadowLimitThroughEnvoy(t *testing.T) {
	tight := tokensLimit("shadow-tight", 10, "tenant")
	tight.Mode = accounting.Shadow
	roomy := tokensLimit("shadow-roomy", 100000, "tenant")
	roomy.Mode = accounting.Shadow
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 50000, "tenant"), tight, roomy})

	resp := r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")),
		jsonUpstream(200, fixture(t, "openai/chat_response.json")))
	wantStatus(t, resp, 200)
	wantHeader(t, resp.Header, "x-ratelimit-limit-tokens", "50000")
	md := resp.Metadata[extproc.MetadataNamespace]
	if md["decision"] != "admitted" || md["shadow_rejected"] != "shadow-tight" {
		t.Errorf("metadata: got decision %v, shadow_rejected %v; want admitted, shadow-tight", md["decision"], md["shadow_rejected"])
	}
	enforced := r.used(t, "tenant-tokens", tenantA)
	if enforced == 0 {
		t.Fatal("the enforced limit was not charged")
	}
	if got := r.used(t, "shadow-tight", tenantA); got != 0 {
		t.Errorf("the shadow limit that would reject: got %d used, want 0", got)
	}
	if got := r.used(t, "shadow-roomy", tenantA); got != enforced {
		t.Errorf("the shadow limit that would admit: got %d used, want %d as on the enforced limit", got, enforced)
	}
}

// TestNoShadowRejectedKeyWithoutShadowLimits checks that an admitted
// request past enforced limits only carries no shadow_rejected key.
func TestNoShadowRejectedKeyWithoutShadowLimits(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 50000, "tenant")})
	resp := r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")),
		jsonUpstream(200, fixture(t, "openai/chat_response.json")))
	wantStatus(t, resp, 200)
	if v, ok := resp.Metadata[extproc.MetadataNamespace]["shadow_rejected"]; ok {
		t.Errorf("shadow_rejected: got %v, want absent", v)
	}
}
