package extproc_test

import (
	"net/http"
	"testing"
	"time"

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

// TestShadowRunBudget: a shadow run budget never ends a run. Steps over
// it pass, named in the metadata, and when an enforced rate limit
// refuses a step the 429 is an ordinary one: retry-after, no
// x-should-retry: false, outcome rejected rather than run_over.
func TestShadowRunBudget(t *testing.T) {
	steps := accounting.Limit{Name: "run-steps-next", Dimension: accounting.Requests, Algorithm: accounting.Lifetime,
		Scope: []string{"run"}, Limit: 2, Window: time.Hour, Mode: accounting.Shadow}
	perMinute := accounting.Limit{Name: "run-per-minute", Dimension: accounting.Requests, Algorithm: accounting.FixedWindow,
		Scope: []string{"run"}, Limit: 4, Window: time.Minute}
	r := newRig(t, []accounting.Limit{perMinute, steps}, withServer(func(o *extproc.Options) { o.Identity = runIdentity }))
	ctx := t.Context()
	for i := range 4 {
		resp := r.envoy.Do(ctx, runStep("run-1", "gpt-4o-mini"), stepUpstream)
		wantStatus(t, resp, 200)
		md := resp.Metadata[extproc.MetadataNamespace]
		want := any(nil)
		if i >= 2 {
			want = "run-steps-next"
		}
		if md["decision"] != "admitted" || md["shadow_rejected"] != want {
			t.Errorf("step %d: metadata: got decision %v, shadow_rejected %v; want admitted, %v", i+1, md["decision"], md["shadow_rejected"], want)
		}
		if v := resp.Header.Values("x-should-retry"); len(v) != 0 {
			t.Errorf("step %d: x-should-retry: got %q, want none", i+1, v)
		}
	}
	resp := r.envoy.Do(ctx, runStep("run-1", "gpt-4o-mini"), stepUpstream)
	wantStatus(t, resp, http.StatusTooManyRequests)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "run-per-minute")
	if v := resp.Header.Values("x-should-retry"); len(v) != 0 {
		t.Errorf("x-should-retry: got %q, want none: the run is not over", v)
	}
	if len(resp.Header.Values("retry-after")) != 1 {
		t.Errorf("retry-after: got %q, want one", resp.Header.Values("retry-after"))
	}
	if md := resp.Metadata[extproc.MetadataNamespace]; md["decision"] != "rejected" {
		t.Errorf("decision: got %v, want rejected", md["decision"])
	}
}
