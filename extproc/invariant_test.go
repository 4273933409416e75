package extproc_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// The tests here hold the server's central invariant: a metered request
// reaches the upstream only with a reservation in place, or is refused —
// whatever the framing of its body, the spelling of its path, or the
// processing mode Envoy runs the filter in. FuzzStreamInvariant checks
// the same against random message sequences.

// bigChat asks for far more than the 3000-token limit of tightRig.
var bigChat = []byte(`{"model":"gpt-4o-mini","max_tokens":50000,"messages":[{"role":"user","content":"hello"}]}`)

// smallChat fits it.
var smallChat = []byte(`{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`)

func tightRig(t *testing.T, f envoytest.Filter, opts ...rigOption) *rig {
	t.Helper()
	r := newRig(t, []accounting.Limit{tokensLimit("tight", 3000, "tenant")}, opts...)
	r.envoy.Filter = f
	return r
}

// calledUpstream records whether the upstream was reached and with what.
type calledUpstream struct {
	called bool
	got    *envoytest.UpstreamRequest
}

func (c *calledUpstream) json(status int, body []byte) envoytest.Upstream {
	return func(ur *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		c.called, c.got = true, ur
		return envoytest.UpstreamResponse{Status: status, Headers: [][2]string{{"content-type", "application/json"}}, Chunks: [][]byte{body}}
	}
}

func split(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		k := min(n, len(b))
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}

func TestRequestTrailersDoNotSkipMetering(t *testing.T) {
	for _, send := range []bool{false, true} {
		name := "trailers skipped"
		if send {
			name = "trailers sent"
		}
		t.Run(name, func(t *testing.T) {
			r := tightRig(t, envoytest.Filter{SendRequestTrailers: send})
			req := chatRequest("a", bigChat)
			req.Trailers = [][2]string{{"x-trailer", "1"}}
			var up calledUpstream
			resp := r.envoy.Do(t.Context(), req, up.json(200, fixture(t, "openai/chat_response.json")))
			wantStatus(t, resp, 429)
			wantHeader(t, resp.Header, "x-should-retry", "false")
			if up.called {
				t.Error("the upstream was called for a request that never fits")
			}

			// An admissible request with a trailer is reserved, capped and
			// settled like any other.
			req = chatRequest("a", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello"}]}`))
			req.Trailers = [][2]string{{"x-trailer", "1"}}
			resp = r.envoy.Do(t.Context(), req, up.json(200, fixture(t, "openai/chat_response.json")))
			wantStatus(t, resp, 200)
			if resp.Header.Get("x-ratelimit-limit-tokens") != "3000" {
				t.Errorf("x-ratelimit-limit-tokens: got %q, want 3000", resp.Header.Get("x-ratelimit-limit-tokens"))
			}
			if !bytes.Contains(up.got.Body, []byte(`"max_tokens":1000`)) {
				t.Errorf("upstream body %s: want the injected cap", up.got.Body)
			}
			if up.got.Trailers.Get("x-trailer") != "1" {
				t.Errorf("upstream trailers %v: want the client's", up.got.Trailers)
			}
			r.envoy.Wait()
			if got := r.used(t, "tight", tenantA); got != 1163 {
				t.Errorf("used: got %d, want the reported usage of 1163", got)
			}
		})
	}
}

func TestStreamedRequestBodyIsHeldUntilReserved(t *testing.T) {
	r := tightRig(t, envoytest.Filter{RequestBody: envoytest.Streamed})
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there, a body in several chunks"}]}`)
	req := chatRequest("a", nil)
	req.Chunks = split(body, 16)
	var up calledUpstream
	resp := r.envoy.Do(t.Context(), req, up.json(200, fixture(t, "openai/chat_response.json")))
	wantStatus(t, resp, 200)
	var got map[string]any
	if err := json.Unmarshal(up.got.Body, &got); err != nil {
		t.Fatalf("upstream body %q: %v", up.got.Body, err)
	}
	if got["max_tokens"] != float64(1000) || got["model"] != "gpt-4o-mini" {
		t.Errorf("upstream body %s: want the whole body with the injected cap", up.got.Body)
	}
	if up.got.Header.Get("content-length") != "" {
		t.Errorf("upstream content-length %q: want none (the decision changes the length)", up.got.Header.Get("content-length"))
	}

	// Too big: refused before a byte of it reaches the upstream.
	up = calledUpstream{}
	req.Chunks = split(bigChat, 7)
	resp = r.envoy.Do(t.Context(), req, up.json(200, fixture(t, "openai/chat_response.json")))
	wantStatus(t, resp, 429)
	if up.called {
		t.Error("the upstream was called for a refused request")
	}
}

func TestStreamedRequestBodyWithTrailers(t *testing.T) {
	for _, send := range []bool{false, true} {
		t.Run("send="+map[bool]string{false: "skip", true: "send"}[send], func(t *testing.T) {
			r := tightRig(t, envoytest.Filter{RequestBody: envoytest.Streamed, SendRequestTrailers: send})
			req := chatRequest("a", nil)
			req.Chunks = split(bigChat, 10)
			req.Trailers = [][2]string{{"x-trailer", "1"}}
			var up calledUpstream
			resp := r.envoy.Do(t.Context(), req, up.json(200, fixture(t, "openai/chat_response.json")))
			// The body never completes: with trailers sent it is refused
			// at the trailers; skipped, the upstream gets none of the
			// held body and its answer is refused.
			wantStatus(t, resp, 400)
			if up.called && len(up.got.Body) != 0 {
				t.Errorf("the upstream got %q of an unreserved body", up.got.Body)
			}
			r.envoy.Wait()
			if got := r.used(t, "tight", tenantA); got != 0 {
				t.Errorf("used: got %d, want 0", got)
			}
		})
	}
}

func TestBufferedPartialBody(t *testing.T) {
	r := tightRig(t, envoytest.Filter{RequestBody: envoytest.BufferedPartial, PartialLimit: 64})
	var up calledUpstream
	// Fits Envoy's buffer: metered as usual.
	resp := r.envoy.Do(t.Context(), chatRequest("a", []byte(`{"model":"gpt-4o-mini","messages":[]}`)), up.json(200, fixture(t, "openai/chat_response.json")))
	wantStatus(t, resp, 200)
	// Larger: Envoy would send the rest on unseen, so it is refused.
	up = calledUpstream{}
	resp = r.envoy.Do(t.Context(), chatRequest("a", smallChat), up.json(200, fixture(t, "openai/chat_response.json")))
	wantStatus(t, resp, 400)
	if up.called {
		t.Error("the upstream was called for a body that could not be held")
	}
}

func TestProcessingModesThatCannotMeterAreRefused(t *testing.T) {
	tests := []struct {
		name   string
		filter envoytest.Filter
		status int
	}{
		{"request body not sent", envoytest.Filter{RequestBody: envoytest.None}, 503},
		{"full duplex", envoytest.Filter{RequestBody: envoytest.FullDuplex}, 503},
		{"request headers skipped", envoytest.Filter{SkipRequestHeaders: true}, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tightRig(t, tt.filter)
			var up calledUpstream
			resp := r.envoy.Do(t.Context(), chatRequest("a", smallChat), up.json(200, fixture(t, "openai/chat_response.json")))
			wantStatus(t, resp, tt.status)
			if up.called {
				t.Error("the upstream was called")
			}
			if !strings.Contains(string(resp.Body), "limiter_misconfigured") {
				t.Errorf("body %s: want the limiter_misconfigured code", resp.Body)
			}
		})
	}
	t.Run("a local reply of an earlier filter passes", func(t *testing.T) {
		// jwt_authn's 401: the server sees only the response.
		r := tightRig(t, envoytest.Filter{SkipRequestHeaders: true})
		req := chatRequest("a", nil)
		var up calledUpstream
		wantStatus(t, r.envoy.Do(t.Context(), req, up.json(401, []byte(`{"error":"jwt"}`))), 401)
	})
	t.Run("other paths pass with the body not sent", func(t *testing.T) {
		r := tightRig(t, envoytest.Filter{RequestBody: envoytest.None})
		req := chatRequest("a", []byte(`{"x":1}`))
		req.Path = "/v1/models"
		var up calledUpstream
		wantStatus(t, r.envoy.Do(t.Context(), req, up.json(200, []byte(`{}`))), 200)
	})
}

func TestWithoutProtocolConfigTheBodyIsBuffered(t *testing.T) {
	r := tightRig(t, envoytest.Filter{NoProtocolConfig: true})
	var up calledUpstream
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", bigChat), up.json(200, nil)), 429)
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", smallChat), up.json(200, fixture(t, "openai/chat_response.json"))), 200)
}

func TestAnyMethodWithABodyIsMetered(t *testing.T) {
	r := tightRig(t, envoytest.Filter{})
	for _, m := range []string{"PUT", "GET", "PATCH"} {
		req := chatRequest("a", bigChat)
		req.Method = m
		var up calledUpstream
		resp := r.envoy.Do(t.Context(), req, up.json(200, nil))
		if resp.Status != 429 || up.called {
			t.Errorf("%s with a body: got %d (upstream called %v), want 429 and no upstream call", m, resp.Status, up.called)
		}
	}
}

func TestEncodedPathsAreMetered(t *testing.T) {
	gemini := []byte(`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":50000}}`)
	paths := []string{
		"/v1beta/models/gemini-2.0-flash:generateContent",
		"/v1beta/models/gemini-2.0-flash%3AgenerateContent",
		"/v1beta/models/gemini-2.0-flash%3agenerateContent",
		"/v1beta/models%2Fgemini-2.0-flash%3AgenerateContent",
		"/v1beta//models/./gemini-2.0-flash:generateContent/",
		"/v1/chat%2Fcompletions",
		"/v1/chat/completions%2F",
	}
	r := tightRig(t, envoytest.Filter{})
	for _, p := range paths {
		body := gemini
		if strings.Contains(p, "chat") {
			body = bigChat
		}
		req := chatRequest("a", body)
		req.Path = p
		var up calledUpstream
		resp := r.envoy.Do(t.Context(), req, up.json(200, nil))
		if resp.Status != 429 || up.called {
			t.Errorf("%s: got %d (upstream called %v), want the never-fits 429", p, resp.Status, up.called)
		}
	}
}

func TestAzureDeploymentNamesTheModel(t *testing.T) {
	r := newRig(t, []accounting.Limit{
		tokensLimit("tenant-tokens", 100000, "tenant"),
		{Name: "gpt-4o-only", Dimension: accounting.Requests, Scope: []string{"tenant"}, Match: map[string]string{"model": "gpt-4o"},
			Algorithm: accounting.FixedWindow, Limit: 1, Window: 3600e9},
	}, withServer(func(o *extproc.Options) { o.AzureDeployments = map[string]string{"prod-4o": "gpt-4o"} }))
	req := chatRequest("a", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
	req.Path = "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21"
	var up calledUpstream
	resp := r.envoy.Do(t.Context(), req, up.json(200, fixture(t, "openai/chat_response.json")))
	wantStatus(t, resp, 200)
	if got := resp.Metadata[extproc.MetadataNamespace]["model"]; got != "gpt-4o" {
		t.Errorf("model: got %v, want the deployment's gpt-4o, not the body's", got)
	}
	// The model-matched limit applies: a second call is refused.
	resp = r.envoy.Do(t.Context(), req, up.json(200, fixture(t, "openai/chat_response.json")))
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "gpt-4o-only")

	// An unmapped deployment is its own model; a deployment called
	// "chat" serving /completions is completions, not chat.
	req.Path = "/openai/deployments/chat/completions"
	req.Body = []byte(`{"prompt":"hi","max_tokens":5}`) // no model: Azure needs none
	resp = r.envoy.Do(t.Context(), req, up.json(200, fixture(t, "openai/completions.json")))
	wantStatus(t, resp, 200)
	md := resp.Metadata[extproc.MetadataNamespace]
	if md["model"] != "chat" || md["api"] != "openai.completions" {
		t.Errorf("got model %v api %v, want chat and openai.completions", md["model"], md["api"])
	}
}

func TestProviderRateLimitHeaderFamiliesAreRemoved(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
	provider := [][2]string{
		{"anthropic-ratelimit-requests-limit", "4000"},
		{"anthropic-ratelimit-requests-remaining", "3999"},
		{"anthropic-ratelimit-requests-reset", "2026-12-01T10:00:00Z"},
		{"anthropic-ratelimit-tokens-remaining", "1"},
		{"anthropic-ratelimit-input-tokens-limit", "400000"},
		{"anthropic-ratelimit-output-tokens-reset", "2026-12-01T10:00:00Z"},
		{"anthropic-priority-input-tokens-remaining", "5"},
		{"x-ratelimit-limit-project-tokens", "9"},
		{"x-ratelimit-remaining-requests", "9999"},
		{"ratelimit", `"default";r=50;t=30`},
		{"ratelimit-policy", `"default";q=100;w=60`},
		{"ratelimitbysize-remaining", "7"},
		{"request-id", "req_1"},
	}
	req := chatRequest("a", fixture(t, "anthropic/messages_request.json"))
	req.Path = "/v1/messages"
	var up calledUpstream
	resp := r.envoy.Do(t.Context(), req, func(ur *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		res := up.json(200, fixture(t, "anthropic/messages.json"))(ur)
		res.Headers = append(res.Headers, provider...)
		return res
	})
	wantStatus(t, resp, 200)
	for _, h := range provider[:len(provider)-1] {
		for _, v := range resp.Header.Values(h[0]) {
			if v == h[1] {
				t.Errorf("%s: got the provider's %q, want it removed", h[0], v)
			}
		}
	}
	wantHeader(t, resp.Header, "request-id", "req_1")
	wantHeader(t, resp.Header, "x-ratelimit-limit-tokens", "100000")
	// On an Anthropic route, tokenwarden's own figures in Anthropic's
	// names, for its SDK: only for the dimensions that applied.
	wantHeader(t, resp.Header, "anthropic-ratelimit-tokens-limit", "100000")
	for _, h := range []string{"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-input-tokens-limit", "ratelimit", "ratelimit-policy"} {
		if v := resp.Header.Values(h); len(v) != 0 {
			t.Errorf("%s: got %q, want none", h, v)
		}
	}
}

func TestStandardRateLimitHeaders(t *testing.T) {
	r := newRig(t, []accounting.Limit{
		tokensLimit("tenant-tokens", 100000, "tenant"),
		{Name: "tenant-rpm", Dimension: accounting.Requests, Scope: []string{"tenant"}, Algorithm: accounting.SlidingWindow, Limit: 600, Window: time.Minute},
	}, withServer(func(o *extproc.Options) { o.IETFRateLimitHeaders = true }))
	resp := r.envoy.Do(t.Context(), chatRequest("a", smallChat), jsonUpstream(200, fixture(t, "openai/chat_response.json")))
	wantStatus(t, resp, 200)
	wantHeader(t, resp.Header, "ratelimit-policy", `"requests";q=600;qu="requests";w=60, "tokens";q=100000;qu="tokens";w=3600`)
	if got := resp.Header.Get("ratelimit"); !strings.HasPrefix(got, `"requests";r=599;t=`) || !strings.Contains(got, `, "tokens";r=`) {
		t.Errorf("ratelimit: got %q, want the remaining requests and tokens", got)
	}
	// Not an Anthropic route: no anthropic-ratelimit-* headers.
	if v := resp.Header.Values("anthropic-ratelimit-tokens-limit"); len(v) != 0 {
		t.Errorf("anthropic-ratelimit-tokens-limit on an OpenAI route: %q", v)
	}
	// The 429 carries them too.
	resp = r.envoy.Do(t.Context(), chatRequest("a", []byte(`{"model":"gpt-4o-mini","max_tokens":200000,"messages":[]}`)), nil)
	wantStatus(t, resp, 429)
	if resp.Header.Get("ratelimit-policy") == "" {
		t.Error("no ratelimit-policy on the 429")
	}
}

func TestAPanicFailsOneStreamOnly(t *testing.T) {
	var c panicky
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")},
		withServer(func(o *extproc.Options) { o.Counter = &c }))
	c.on = true
	resp := r.envoy.Do(t.Context(), chatRequest("a", smallChat), nil)
	if resp.Status != http.StatusInternalServerError || resp.Err == nil {
		t.Fatalf("got %d (%v), want the stream failed (500)", resp.Status, resp.Err)
	}
	c.on = false
	var up calledUpstream
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", smallChat), up.json(200, fixture(t, "openai/chat_response.json"))), 200)
}

// panicky is a token counter that panics while on.
type panicky struct{ on bool }

func (p *panicky) CountTokens(string, string) int64 {
	if p.on {
		panic("counter exploded")
	}
	return 1
}

func (p *panicky) ImageTokens(string, string, int, int) int64 { return p.CountTokens("", "") }

func TestHiddenReasoningWithoutUsageKeepsTheCap(t *testing.T) {
	stream := fixture(t, "openai/chat_no_usage.sse")
	tests := []struct {
		model string
		// wantReserved: the whole reservation stands; otherwise input
		// plus the output seen.
		wantReserved bool
	}{
		{"o3-mini", true},
		{"gpt-5-nano", true},
		{"gpt-4o-mini", false},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")},
				withServer(func(o *extproc.Options) { o.InjectStreamUsage = false }))
			body := []byte(`{"model":"` + tt.model + `","stream":true,"max_completion_tokens":20000,"messages":[{"role":"user","content":"Think hard."}]}`)
			resp := r.envoy.Do(t.Context(), chatRequest("a", body), sseUpstream(stream, 64, 0))
			wantStatus(t, resp, 200)
			r.envoy.Wait()
			used := r.used(t, "tenant-tokens", tenantA)
			if tt.wantReserved && used < 20000 {
				t.Errorf("used: got %d, want at least the 20000 cap (the reasoning was never streamed)", used)
			}
			if !tt.wantReserved && used >= 1000 {
				t.Errorf("used: got %d, want the input and the output seen", used)
			}
		})
	}
}

func TestAbsurdUpstreamUsageIsClamped(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")},
		withServer(func(o *extproc.Options) { o.Registerer = reg }))
	for _, usage := range []string{
		`{"prompt_tokens":1e30,"completion_tokens":1e30,"total_tokens":2e30}`,
		`{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}`,
		`{"prompt_tokens":-5,"completion_tokens":-9223372036854775808}`,
	} {
		body := []byte(`{"id":"x","object":"chat.completion","choices":[],"usage":` + usage + `}`)
		resp := r.envoy.Do(t.Context(), chatRequest("absurd", smallChat), jsonUpstream(200, body))
		if resp.Status != 200 && resp.Status != 429 {
			t.Fatalf("usage %s: got status %d (%v), want the server to keep serving", usage, resp.Status, resp.Err)
		}
	}
	r.envoy.Wait()
	used := r.used(t, "tenant-tokens", accounting.Attributes{{Name: "tenant", Value: "absurd"}})
	if used < 100000 || used > 2*accounting.MaxTokens {
		t.Errorf("used: got %d, want the limit exhausted by a clamped charge", used)
	}
	// The server still answers, and its metrics still gather.
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("absurd", smallChat), nil), 429)
	if _, err := reg.Gather(); err != nil {
		t.Errorf("gathering metrics: %v", err)
	}
}

func TestEnvoyRepliesAfterForwarding(t *testing.T) {
	body := []byte(`{"model":"gpt-4o-mini","max_tokens":500,"messages":[{"role":"user","content":"hello there"}]}`)
	tests := []struct {
		name       string
		attributes bool
		reply      string
		want       int64 // tokens charged
	}{
		// The provider got the request and may have billed it in full.
		{"route timeout", false, "response_timeout", 510},
		{"route timeout, attributes", true, "response_timeout", 510},
		{"reset after sending", true, "upstream_reset_before_response_started{connection_termination}", 510},
		// Without attributes a bare 503 cannot say whether the request
		// was sent: the reservation stands.
		{"connection refused, no attributes", false, "upstream_reset_before_response_started{remote_connection_failure}", 510},
		// With them, a request that never left Envoy costs nothing.
		{"connection refused", true, "upstream_reset_before_response_started{remote_connection_failure}", 0},
		{"no healthy upstream", true, "no_healthy_upstream", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
			r.envoy.Filter.ResponseAttributes = tt.attributes
			resp := r.envoy.Do(t.Context(), chatRequest("a", body), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				return envoytest.UpstreamResponse{EnvoyReply: tt.reply}
			})
			if resp.Status != 503 && resp.Status != 504 {
				t.Fatalf("status: got %d, want Envoy's 503 or 504", resp.Status)
			}
			r.envoy.Wait()
			if got := r.used(t, "tenant-tokens", tenantA); got != tt.want {
				t.Errorf("used: got %d, want %d", got, tt.want)
			}
		})
	}
}

// TestResponseBodyNotSentKeepsTheReservation: with response_body_mode
// NONE the usage can never be read; a streamed answer settled on the
// output seen (none) would be charged its input alone.
func TestResponseBodyNotSentKeepsTheReservation(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
	r.envoy.Filter.NoResponseBody = true
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"hello there"}]}`)
	resp := r.envoy.Do(t.Context(), chatRequest("a", body), sseUpstream(fixture(t, "openai/chat_stream_usage.sse"), 64, 0))
	wantStatus(t, resp, 200)
	r.envoy.Wait()
	if got := r.used(t, "tenant-tokens", tenantA); got < 500 {
		t.Errorf("used: got %d, want the whole reservation (input + the 500 cap)", got)
	}
}
