package extproc_test

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
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

// TestProviderTooLargeDoesNotBlockEveryone: a provider answers 429 to a
// single request too large for its per-minute limit ("Request too large
// for gpt-4o … on tokens per min (TPM): Limit 30000, Requested 50000"),
// however little the account has spent, and says in the same reply how
// much is left. Charging the provider limits up to their capacity on
// that 429 would let one tenant, with one oversized request a window,
// shut every tenant out of the account. A 429 that states what is left
// is corrected to that figure, as any other reply is; one that states
// nothing for a limit's dimension still blocks it.
func TestProviderTooLargeDoesNotBlockEveryone(t *testing.T) {
	tooLarge := []byte(`{"error":{"message":"Request too large for gpt-4o on tokens per min (TPM): Limit 10000, Requested 50000.","type":"tokens","code":"rate_limit_exceeded"}}`)
	tests := []struct {
		name    string
		headers [][2]string
		// used is what provider-tpm holds after the 429; admitted says
		// whether tenant b's next request is then let through.
		used     int64
		admitted bool
	}{
		{"too large, the figure says the account is untouched", [][2]string{{"x-ratelimit-remaining-tokens", "10000"}}, 0, true},
		{"anthropic's figure", [][2]string{{"anthropic-ratelimit-tokens-remaining", "9000"}}, 1000, true},
		{"exhausted, the figure says so", [][2]string{{"x-ratelimit-remaining-tokens", "0"}}, 10000, false},
		{"a figure for the other dimension only", [][2]string{{"x-ratelimit-remaining-requests", "50"}}, 10000, false},
		{"no figure at all", nil, 10000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{providerTPM, tenantTPM}, withServer(withProvider))
			resp := r.envoy.Do(t.Context(), providerChat("a", "openai-main"), jsonUpstream(429, tooLarge, tt.headers...))
			wantStatus(t, resp, 429)
			if used := r.used(t, "provider-tpm", onAccount("openai-main", "gpt-4o-mini")); used != tt.used {
				t.Errorf("provider counter after the 429: %d used, want %d", used, tt.used)
			}
			resp = r.envoy.Do(t.Context(), providerChat("b", "openai-main"), jsonUpstream(200, usage1010))
			if got := resp.Status == 200; got != tt.admitted {
				t.Errorf("tenant b after tenant a's 429: status %d, want admitted %v", resp.Status, tt.admitted)
			}
		})
	}
}

// TestHugeModelNameIsRefused: the model a body or path names becomes the
// model attribute, and with it part of the store key of every limit
// scoped by model, verbatim; identity values are bounded for that very
// reason (extproc.MaxAttributeBytes), the model was not. A client that
// names a fresh megabyte-long model on each request made each one a new
// counter holding a megabyte key until its window ended: a day's window
// at one request a second is 86 GB of keys. A model name longer than an
// identity value may be is refused with a 400 in the API's own shape,
// before anything is reserved.
func TestHugeModelNameIsRefused(t *testing.T) {
	perModel := tokensLimit("per-model", 1_000_000, "tenant", "model")
	tests := []struct {
		name   string
		req    envoytest.Request
		status int
	}{
		{"openai body, 1 MiB model", chatRequest("a", []byte(`{"model":"gpt-4o-`+strings.Repeat("x", 1<<20)+`","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`)), 400},
		{"openai body, just over the bound", chatRequest("a", []byte(`{"model":"`+strings.Repeat("m", extproc.MaxAttributeBytes+1)+`","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`)), 400},
		{"openai body, at the bound", chatRequest("a", []byte(`{"model":"`+strings.Repeat("m", extproc.MaxAttributeBytes)+`","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`)), 200},
		{"gemini path", envoytest.Request{Path: "/v1beta/models/gemini-" + strings.Repeat("x", 4000) + ":generateContent",
			Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", "a"}},
			Body:    []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{perModel})
			called := false
			resp := r.envoy.Do(t.Context(), tt.req, func(u *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				called = true
				return jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`))(u)
			})
			wantStatus(t, resp, tt.status)
			if called != (tt.status == 200) {
				t.Errorf("upstream called: %v, want %v", called, tt.status == 200)
			}
			if tt.status != 200 && !strings.Contains(string(resp.Body), "model") {
				t.Errorf("the refusal does not say what is wrong: %s", resp.Body)
			}
		})
	}
}
