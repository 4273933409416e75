package extproc_test

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// The tests in this file are the second adversarial review's findings
// (see attack_test.go for the first): each sends what a client can send,
// and asserts what the limiter's promise requires.

// TestClientRouteModelHeaderIsNotBelieved: x-tokenwarden-model is
// tokenwarden's own routing header, set on a downgraded request so that
// Envoy routes the fallback. The shipped envoy.yaml strips a client's
// copy at the edge; an Istio, Gateway or hand-written config that does
// not would let a client pick the fallback's upstream (and a provider
// limit scoped by route or cluster) while naming and being charged as
// any model it likes. So a client's copy is removed on every request,
// metered or not, and the route matched again without it.
func TestClientRouteModelHeaderIsNotBelieved(t *testing.T) {
	tests := []struct {
		name string
		req  envoytest.Request
	}{
		{"metered", chatRequest("a", []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`))},
		{"not metered", envoytest.Request{Method: "GET", Path: "/v1/models", Headers: [][2]string{{"x-tenant-id", "a"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, downgradeLimits())
			tt.req.Headers = append(tt.req.Headers, [2]string{extproc.RouteModelHeader, "gpt-4o-mini"})
			var up *envoytest.UpstreamRequest
			resp := r.envoy.Do(t.Context(), tt.req, func(u *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				up = u
				return jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`))(u)
			})
			wantStatus(t, resp, 200)
			if up == nil {
				t.Fatal("the request did not reach the upstream")
			}
			if v := up.Header.Values(extproc.RouteModelHeader); len(v) != 0 {
				t.Errorf("the upstream got the client's %s: %q, want none", extproc.RouteModelHeader, v)
			}
			if !up.RouteCleared {
				t.Errorf("the route chosen on the client's %s was kept, want clear_route_cache", extproc.RouteModelHeader)
			}
		})
	}
}
