package extproc_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// providerTPM models a provider account's 10000 tokens a minute for each
// model, shared by every tenant sent to it; tenantTPM is each tenant's
// own.
var (
	providerTPM = accounting.Limit{Name: "provider-tpm", Dimension: accounting.Tokens, Scope: []string{"provider", "model"},
		Algorithm: accounting.SlidingWindow, Limit: 10000, Window: time.Minute}
	tenantTPM = tokensLimit("tenant-tpm", 100000, "tenant")
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
// provider scope for every tenant, at once, for no longer than the
// provider's retry-after; another provider and the tenants' own limits
// are left alone, and the client gets the provider's 429 as it was.
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
		if secs, err := strconv.Atoi(resp.Header.Get("retry-after")); err != nil || secs > 20 {
			t.Errorf("tenant %s: retry-after %q, want at most the provider's 20", tenant, resp.Header.Get("retry-after"))
		}
	}
	wantStatus(t, r.envoy.Do(t.Context(), providerChat("a", "openai-backup"), jsonUpstream(200, usage1010)), 200)
	if used := r.used(t, "tenant-tpm", accounting.Attributes{{Name: "tenant", Value: "a"}}); used != 2*1010 {
		t.Errorf("tenant a's own counter: %d used, want %d (the two completions; the refused call costs nothing)", used, 2*1010)
	}
}

// TestProviderBlockLastsTheProviderWait: a Gemini 429 says nothing of
// what is left nor when to retry, and a request whose size the estimate
// cannot see (a fileData part) can provoke one. It blocks the account's
// model for every tenant for at most a minute, whatever the windows of
// its limits: the per-minute limit is blocked for that minute, a daily
// one not at all. Another tenant is served again a minute later.
func TestProviderBlockLastsTheProviderWait(t *testing.T) {
	clock := &settableClock{now: time.Date(2026, time.March, 2, 9, 0, 10, 0, time.UTC)}
	daily := accounting.Limit{Name: "provider-daily", Dimension: accounting.Tokens, Scope: []string{"provider", "model"},
		Algorithm: accounting.FixedWindow, Limit: 1_000_000, Window: 24 * time.Hour}
	r := newRig(t, []accounting.Limit{providerTPM, daily}, withServer(withProvider), withClock(clock))
	gemini := func(tenant string, parts string) envoytest.Request {
		return envoytest.Request{Path: "/v1beta/models/gemini-2.5-flash:generateContent",
			Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", tenant}, {"x-provider", "vertex-main"}},
			Body:    []byte(`{"contents":[{"role":"user","parts":[` + parts + `]}],"generationConfig":{"maxOutputTokens":100}}`)}
	}
	video := `{"fileData":{"mimeType":"video/mp4","fileUri":"gs://bucket/two-hours.mp4"}},{"text":"summarise"}`
	exhausted := []byte(`{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`)
	wantStatus(t, r.envoy.Do(t.Context(), gemini("a", video), jsonUpstream(429, exhausted)), 429)

	resp := r.envoy.Do(t.Context(), gemini("b", `{"text":"hi"}`), jsonUpstream(200, []byte(`{"candidates":[]}`)))
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "provider-tpm")
	if secs, err := strconv.Atoi(resp.Header.Get("retry-after")); err != nil || secs > 60 {
		t.Errorf("retry-after %q, want at most 60", resp.Header.Get("retry-after"))
	}
	clock.set(clock.Now().Add(accounting.MaxProviderBlock))
	wantStatus(t, r.envoy.Do(t.Context(), gemini("b", `{"text":"hi"}`), jsonUpstream(200, []byte(`{"candidates":[]}`))), 200)
}

// withClock puts the store and the Limiter on c.
func withClock(c *settableClock) rigOption {
	return func(_ *extproc.Options, a *accounting.Options) {
		a.Store, a.Now = memstore.New(memstore.Options{Now: c.Now}), c.Now
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
	wantStatus(t, r.envoy.Do(t.Context(), req, jsonUpstream(429, []byte(`{}`), [2]string{"retry-after", "30"})), 429)
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
