package extproc_test

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// providerTPM models a provider account's 10000 tokens an hour for each
// model, shared by every tenant sent to it; tenantTPM is each tenant's
// own.
var (
	providerTPM = tokensLimit("provider-tpm", 10000, "provider", "model")
	tenantTPM   = tokensLimit("tenant-tpm", 100000, "tenant")
)

func withProvider(o *extproc.Options) {
	o.Identity.Attributes = append(o.Identity.Attributes, extproc.AttributeSource{Name: "provider", Header: "x-provider"})
}

func providerChat(tenant, provider string) envoytest.Request {
	req := chatRequest(tenant, contractChat) // reserves about 1010 tokens
	req.Headers = append(req.Headers, [2]string{"x-provider", provider})
	return req
}

// onAccount names provider-tpm's counter for a provider account and model.
func onAccount(provider, model string) accounting.Attributes {
	return accounting.Attributes{{Name: "provider", Value: provider}, {Name: "model", Value: model}}
}

var usage1010 = []byte(`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1000,"total_tokens":1010}}`)

// TestProviderRateLimitBlocks: the provider's own 429 blocks its
// provider scope for every tenant, at once, until the provider limit's
// window frees it; another provider and the tenants' own limits are
// left alone, and the client gets the provider's 429 as it was.
func TestProviderRateLimitBlocks(t *testing.T) {
	r := newRig(t, []accounting.Limit{providerTPM, tenantTPM}, withServer(withProvider))
	wantStatus(t, r.envoy.Do(t.Context(), providerChat("a", "openai-main"), jsonUpstream(200, usage1010)), 200)

	resp := r.envoy.Do(t.Context(), providerChat("a", "openai-main"),
		jsonUpstream(429, []byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`),
			[2]string{"retry-after", "20"}, [2]string{"x-ratelimit-remaining-requests", "0"}))
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "retry-after", "20")
	if got := resp.Header.Get("x-tokenwarden-limit"); got != "" {
		t.Errorf("the provider's 429 names limit %q, want none: it is the provider's", got)
	}

	if used := r.used(t, "provider-tpm", onAccount("openai-main", "gpt-4o-mini")); used != 10000 {
		t.Errorf("provider counter after its 429: %d used, want 10000", used)
	}
	for _, tenant := range []string{"a", "b"} {
		resp := r.envoy.Do(t.Context(), providerChat(tenant, "openai-main"), jsonUpstream(200, usage1010))
		wantStatus(t, resp, 429)
		wantHeader(t, resp.Header, "x-tokenwarden-limit", "provider-tpm")
		if resp.Upstream != nil {
			t.Errorf("tenant %s: a blocked provider was called", tenant)
		}
	}
	wantStatus(t, r.envoy.Do(t.Context(), providerChat("a", "openai-backup"), jsonUpstream(200, usage1010)), 200)
	if used := r.used(t, "tenant-tpm", accounting.Attributes{{Name: "tenant", Value: "a"}}); used != 2*1010 {
		t.Errorf("tenant a's own counter: %d used, want %d (the two completions; the refused call costs nothing)", used, 2*1010)
	}
}

// TestProviderRemainingCorrects: the provider's remaining figures lower
// its counter when they show less left than tokenwarden thinks, never
// raise it, and are removed from what the client sees either way.
func TestProviderRemainingCorrects(t *testing.T) {
	tests := []struct {
		name    string
		headers [][2]string
		used    int64 // on provider-tpm after the response
	}{
		{"openai below ours", [][2]string{{"x-ratelimit-remaining-tokens", "4000"}, {"x-ratelimit-limit-tokens", "30000000"}}, 6000},
		{"anthropic's below ours", [][2]string{{"anthropic-ratelimit-tokens-remaining", "2500"}, {"anthropic-ratelimit-output-tokens-remaining", "400"}}, 7500},
		{"above ours is no refund", [][2]string{{"x-ratelimit-remaining-tokens", "29999000"}}, 1010},
		{"not a number", [][2]string{{"x-ratelimit-remaining-tokens", "lots"}}, 1010},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{providerTPM, tenantTPM}, withServer(withProvider))
			resp := r.envoy.Do(t.Context(), providerChat("a", "p"), jsonUpstream(200, usage1010, tt.headers...))
			wantStatus(t, resp, 200)
			for _, h := range tt.headers {
				if h[0] == "x-ratelimit-remaining-tokens" || h[0] == "x-ratelimit-limit-tokens" {
					continue // tokenwarden's own figures take these names
				}
				if got := resp.Header.Get(h[0]); got != "" {
					t.Errorf("the provider's %s reached the client: %q", h[0], got)
				}
			}
			if got := resp.Header.Get("x-ratelimit-remaining-tokens"); got == "4000" || got == "29999000" {
				t.Errorf("x-ratelimit-remaining-tokens %s is the provider's, want tokenwarden's", got)
			}
			if used := r.used(t, "provider-tpm", onAccount("p", "gpt-4o-mini")); used != tt.used {
				t.Errorf("provider counter: %d used, want %d", used, tt.used)
			}
		})
	}
}

// TestProviderFigureCorrectsItsOwnModel: OpenAI and Anthropic state what
// is left per model. An o1-pro reply saying no tokens are left corrects
// o1-pro's counter on the account, and never gpt-4o-mini's: another
// tenant's gpt-4o-mini request goes on.
func TestProviderFigureCorrectsItsOwnModel(t *testing.T) {
	r := newRig(t, []accounting.Limit{providerTPM, tenantTPM}, withServer(withProvider))
	o1pro := func(tenant string) envoytest.Request {
		req := chatRequest(tenant, []byte(`{"model":"o1-pro","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`))
		req.Headers = append(req.Headers, [2]string{"x-provider", "openai-main"})
		return req
	}
	wantStatus(t, r.envoy.Do(t.Context(), o1pro("a"), jsonUpstream(200, usage1010, [2]string{"x-ratelimit-remaining-tokens", "0"})), 200)
	if used := r.used(t, "provider-tpm", onAccount("openai-main", "o1-pro")); used != 10000 {
		t.Errorf("o1-pro's counter after its figure of 0: %d used, want 10000", used)
	}
	if used := r.used(t, "provider-tpm", onAccount("openai-main", "gpt-4o-mini")); used != 0 {
		t.Errorf("gpt-4o-mini's counter after o1-pro's figure: %d used, want 0", used)
	}
	wantStatus(t, r.envoy.Do(t.Context(), providerChat("b", "openai-main"), jsonUpstream(200, usage1010)), 200)
	resp := r.envoy.Do(t.Context(), o1pro("b"), jsonUpstream(200, usage1010))
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "provider-tpm")
}

// TestProviderFeedbackNeedsAProviderLimit: without a limit scoped by
// provider, a provider's 429 and figures change no counter.
func TestProviderFeedbackNeedsAProviderLimit(t *testing.T) {
	r := newRig(t, []accounting.Limit{tenantTPM}, withServer(withProvider))
	wantStatus(t, r.envoy.Do(t.Context(), providerChat("a", "p"), jsonUpstream(429, []byte(`{}`), [2]string{"retry-after", "5"})), 429)
	if used := r.used(t, "tenant-tpm", accounting.Attributes{{Name: "tenant", Value: "a"}}); used != 0 {
		t.Errorf("tenant counter after a provider 429: %d used, want 0", used)
	}
}

// TestProviderFromUpstreamCluster: the provider attribute comes from the
// upstream cluster Envoy routed the request to (xds.cluster_name, in the
// filter's request_attributes), which no client header can change.
func TestProviderFromUpstreamCluster(t *testing.T) {
	r := newRig(t, []accounting.Limit{providerTPM}, withServer(func(o *extproc.Options) {
		o.Identity.Attributes = append(o.Identity.Attributes,
			extproc.AttributeSource{Name: "provider", EnvoyAttribute: "xds.cluster_name"})
	}))
	req := chatRequest("a", contractChat)
	req.Headers = append(req.Headers, [2]string{"x-provider", "elsewhere"})
	req.Attributes = map[string]string{"xds.cluster_name": "openai-main"}
	wantStatus(t, r.envoy.Do(t.Context(), req, jsonUpstream(429, []byte(`{}`), [2]string{"retry-after", "3"})), 429)
	if used := r.used(t, "provider-tpm", onAccount("openai-main", "gpt-4o-mini")); used != 10000 {
		t.Errorf("cluster openai-main after its 429: %d used, want 10000", used)
	}
	resp := r.envoy.Do(t.Context(), req, jsonUpstream(200, usage1010))
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "provider-tpm")
	// A request to no known cluster is not under the provider limit.
	req.Attributes = nil
	wantStatus(t, r.envoy.Do(t.Context(), req, jsonUpstream(200, usage1010)), 200)
}
