package extproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

var tenantA = accounting.Attributes{{Name: "tenant", Value: "a"}}

func TestAdmitAndSettleJSON(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
	resp := r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")),
		jsonUpstream(200, fixture(t, "openai/chat_response.json"),
			[2]string{"x-ratelimit-remaining-tokens", "29999"}, [2]string{"x-ratelimit-limit-tokens", "30000"}))
	wantStatus(t, resp, 200)

	// The output cap was injected, and content-length follows the body.
	up := resp.Upstream
	if !strings.HasSuffix(string(compact(up.Body)), `,"max_tokens":1000}`) {
		t.Errorf("upstream body does not end with the injected cap: %s", up.Body[len(up.Body)-40:])
	}
	if got, want := up.Header.Get("content-length"), strconv.Itoa(len(up.Body)); got != want {
		t.Errorf("upstream content-length: got %s, want %s", got, want)
	}
	// The upstream's account-wide figures are replaced by the caller's.
	wantHeader(t, resp.Header, "x-ratelimit-limit-tokens", "100000")
	rem, err := strconv.Atoi(resp.Header.Get("x-ratelimit-remaining-tokens"))
	// The estimate: ~120 tokens of text, a low-detail image at
	// gpt-4o-mini's 2833, and the injected cap of 1000.
	if err != nil || rem >= 100000-3900 || rem < 100000-4100 {
		t.Errorf("x-ratelimit-remaining-tokens: got %q, want the limit less the estimate (~3950)", resp.Header.Get("x-ratelimit-remaining-tokens"))
	}
	if got := resp.Header.Get("x-ratelimit-reset-tokens"); !strings.HasSuffix(got, "s") {
		t.Errorf("x-ratelimit-reset-tokens: got %q, want a Go duration", got)
	}
	// The estimate is replaced by the usage: 1117 + 46.
	if got := r.used(t, "tenant-tokens", tenantA); got != 1163 {
		t.Errorf("tokens used after settlement: got %d, want 1163", got)
	}
	md := resp.Metadata[extproc.MetadataNamespace]
	if md["actual_tokens"] != 1163.0 || md["settled_on"] != "usage" || md["model"] != "gpt-4o-mini" {
		t.Errorf("dynamic metadata for the access log: got %v", md)
	}
	if est, _ := md["estimate_tokens"].(float64); est < 1000 {
		t.Errorf("estimate_tokens: got %v, want the reservation (> 1000)", md["estimate_tokens"])
	}
}

func TestStreamSettlesFromUsageChunk(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"Summarise TS 23.501."}]}`)
	resp := r.envoy.Do(t.Context(), chatRequest("a", body), sseUpstream(fixture(t, "openai/chat_stream_usage.sse"), 7, 0))
	wantStatus(t, resp, 200)
	if !strings.Contains(string(resp.Upstream.Body), `"stream_options":{"include_usage":true}`) {
		t.Errorf("include_usage not injected: %s", resp.Upstream.Body)
	}
	if !strings.Contains(string(resp.Upstream.Body), `"max_tokens":500`) || strings.Count(string(resp.Upstream.Body), "max_tokens") != 1 {
		t.Errorf("the request's own cap must be kept, not doubled: %s", resp.Upstream.Body)
	}
	if string(resp.Body) != string(fixture(t, "openai/chat_stream_usage.sse")) {
		t.Errorf("stream was altered on its way to the client")
	}
	if got := r.used(t, "tenant-tokens", tenantA); got != 224 {
		t.Errorf("tokens used: got %d, want 224", got)
	}
}

func TestCutStream(t *testing.T) {
	stream := fixture(t, "openai/chat_stream_usage.sse")
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"Summarise TS 23.501."}]}`)
	usageEnd := strings.Index(string(stream), "data: [DONE]")

	tests := []struct {
		name     string
		cutAfter int // chunks of 16 bytes
		check    func(t *testing.T, used int64)
	}{
		{"before any output", 1, func(t *testing.T, used int64) {
			// The input estimate alone: more than zero, far below the
			// reservation of input + 500.
			if used <= 0 || used >= 100 {
				t.Errorf("used: got %d, want the input estimate (0 < used < 100)", used)
			}
		}},
		{"after some output", (usageEnd - 400) / 16, func(t *testing.T, used int64) {
			if used <= 20 || used >= 200 {
				t.Errorf("used: got %d, want input plus observed output (20 < used < 200)", used)
			}
		}},
		{"after the usage chunk", usageEnd/16 + 1, func(t *testing.T, used int64) {
			if used != 224 {
				t.Errorf("used: got %d, want the reported 224", used)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
			resp := r.envoy.Do(t.Context(), chatRequest("a", body), sseUpstream(stream, 16, tt.cutAfter))
			if !resp.Cut {
				t.Fatalf("response was not cut")
			}
			r.envoy.Wait()
			tt.check(t, r.used(t, "tenant-tokens", tenantA))
		})
	}
}

func TestClientGoneBeforeResponse(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
	body := []byte(`{"model":"gpt-4o-mini","max_tokens":500,"messages":[{"role":"user","content":"hello there"}]}`)
	resp := r.envoy.Do(t.Context(), chatRequest("a", body), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		return envoytest.UpstreamResponse{CutBeforeHeaders: true}
	})
	if !resp.Cut {
		t.Fatal("not cut")
	}
	r.envoy.Wait()
	// The provider got the request and may have generated (and billed)
	// all of it: the whole reservation stands.
	if got, want := r.used(t, "tenant-tokens", tenantA), int64(510); got != want {
		t.Errorf("used: got %d, want the whole reservation %d (10 input + the 500 cap)", got, want)
	}
}

func TestProviderRateLimitHeadersAreRemoved(t *testing.T) {
	// Only a tokens limit applies: the provider's requests figures must
	// not reach the client either.
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
	resp := r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")),
		jsonUpstream(200, fixture(t, "openai/chat_response.json"),
			[2]string{"x-ratelimit-limit-requests", "10000"}, [2]string{"x-ratelimit-remaining-requests", "9999"},
			[2]string{"x-ratelimit-reset-requests", "6ms"}, [2]string{"x-ratelimit-remaining-tokens", "29999"}))
	wantStatus(t, resp, 200)
	for _, h := range []string{"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"} {
		if v := resp.Header.Values(h); len(v) != 0 {
			t.Errorf("%s: got the provider's %q, want none", h, v)
		}
	}
	wantHeader(t, resp.Header, "x-ratelimit-limit-tokens", "100000")
}

func TestCutRequestKeepsItsEstimateInMetadata(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
	resp := r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		return envoytest.UpstreamResponse{CutBeforeHeaders: true}
	})
	md := resp.Metadata[extproc.MetadataNamespace]
	if md["decision"] != "admitted" || md["reservation"] == nil || md["estimate_tokens"] == nil || md["model"] != "gpt-4o-mini" {
		t.Errorf("metadata of an admitted request that never completed: got %v", md)
	}
}

func TestStripAcceptEncoding(t *testing.T) {
	for _, strip := range []bool{false, true} {
		r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")},
			withServer(func(o *extproc.Options) { o.StripAcceptEncoding = strip }))
		req := chatRequest("a", fixture(t, "openai/chat_request.json"))
		req.Headers = append(req.Headers, [2]string{"accept-encoding", "gzip, br"})
		resp := r.envoy.Do(t.Context(), req, jsonUpstream(200, fixture(t, "openai/chat_response.json")))
		wantStatus(t, resp, 200)
		if got := resp.Upstream.Header.Get("accept-encoding"); (got == "") != strip {
			t.Errorf("strip=%v: upstream accept-encoding %q", strip, got)
		}
	}
}

func TestUpstreamErrorRefundsTokens(t *testing.T) {
	for _, status := range []int{400, 429, 500, 503} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			r := newRig(t, []accounting.Limit{
				tokensLimit("tenant-tokens", 100000, "tenant"),
				{Name: "tenant-rpm", Dimension: accounting.Requests, Scope: []string{"tenant"}, Limit: 10, Window: time.Minute},
				{Name: "tenant-spend", Dimension: accounting.Cost, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1_000_000, Window: 24 * time.Hour},
			})
			resp := r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")),
				jsonUpstream(status, []byte(`{"error":{"message":"upstream says no","type":"server_error"}}`)))
			wantStatus(t, resp, status)
			wantHeader(t, resp.Header, "x-ratelimit-limit-requests", "10")
			wantHeader(t, resp.Header, "x-ratelimit-remaining-requests", "9")
			wantHeader(t, resp.Header, "x-ratelimit-limit-cost", "1.000000")
			if got := r.used(t, "tenant-tokens", tenantA); got != 0 {
				t.Errorf("tokens used: got %d, want 0", got)
			}
			if got := r.used(t, "tenant-spend", tenantA); got != 0 {
				t.Errorf("cost used: got %d, want 0", got)
			}
			if got := r.used(t, "tenant-rpm", tenantA); got != 1 {
				t.Errorf("requests used: got %d, want 1", got)
			}
		})
	}
}

// openaiError is the shape of an OpenAI error body.
type openaiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, body []byte) openaiError {
	t.Helper()
	var e openaiError
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, body)
	}
	return e
}

func TestRateLimitedReply(t *testing.T) {
	// An hour's window frees within ShouldRetryMax: the reply invites a
	// retry (TestLongWaitReply is the reply past it).
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1500, "tenant")},
		withServer(func(o *extproc.Options) { o.ShouldRetryMax = 2 * time.Hour }))
	small := []byte(`{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`)
	// Usage of 1200 is booked, leaving 300.
	resp := r.envoy.Do(t.Context(), chatRequest("a", small),
		jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":200,"completion_tokens":1000,"total_tokens":1200}}`)))
	wantStatus(t, resp, 200)

	called := false
	resp = r.envoy.Do(t.Context(), chatRequest("a", small), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		called = true
		return envoytest.UpstreamResponse{Status: 200}
	})
	wantStatus(t, resp, 429)
	if called || !resp.Local {
		t.Errorf("the upstream was called for a rejected request")
	}
	wantHeader(t, resp.Header, "content-type", "application/json")
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "tenant-tokens")
	wantHeader(t, resp.Header, "x-ratelimit-limit-tokens", "1500")
	wantHeader(t, resp.Header, "x-ratelimit-remaining-tokens", "300")
	// A fixed 1h window frees at the end of the hour: whole seconds
	// rounded up, and milliseconds that agree with them.
	secs, err := strconv.Atoi(resp.Header.Get("retry-after"))
	if err != nil || secs < 1 || secs > 3600 {
		t.Errorf("retry-after: got %q, want 1..3600", resp.Header.Get("retry-after"))
	}
	ms, err := strconv.Atoi(resp.Header.Get("retry-after-ms"))
	if err != nil || ms <= (secs-1)*1000 || ms > secs*1000 {
		t.Errorf("retry-after-ms: got %q, want in ((%d-1)*1000, %d*1000]", resp.Header.Get("retry-after-ms"), secs, secs)
	}
	if resp.Header.Get("x-should-retry") != "" {
		t.Errorf("x-should-retry set on a request that fits later")
	}
	e := decodeError(t, resp.Body)
	if e.Error.Type != "tokens" || e.Error.Code != "rate_limit_exceeded" {
		t.Errorf("error type/code: got %q/%q, want tokens/rate_limit_exceeded", e.Error.Type, e.Error.Code)
	}
	for _, want := range []string{"tenant-tokens", "tokens", "limit 1500", "remaining 300", "requested 10", "try again in"} {
		if !strings.Contains(e.Error.Message, want) {
			t.Errorf("message %q does not mention %q", e.Error.Message, want)
		}
	}
	if md := resp.Metadata[extproc.MetadataNamespace]; md["limit"] != "tenant-tokens" || md["decision"] != "rejected" {
		t.Errorf("dynamic metadata of a rejection: got %v", md)
	}
	// The rejected request reserved nothing.
	if got := r.used(t, "tenant-tokens", tenantA); got != 1200 {
		t.Errorf("tokens used: got %d, want 1200", got)
	}
}

func TestNeverFitsReply(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 500, "tenant")})
	resp := r.envoy.Do(t.Context(), chatRequest("a", []byte(`{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`)), nil)
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-should-retry", "false")
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "tenant-tokens")
	wantHeader(t, resp.Header, "x-ratelimit-limit-tokens", "500")
	if v := resp.Header.Values("retry-after"); len(v) != 0 {
		t.Errorf("retry-after on a request that never fits: %q", v)
	}
	if v := resp.Header.Values("retry-after-ms"); len(v) != 0 {
		t.Errorf("retry-after-ms on a request that never fits: %q", v)
	}
	e := decodeError(t, resp.Body)
	if !strings.Contains(e.Error.Message, "too large") || !strings.Contains(e.Error.Message, "500") {
		t.Errorf("message: got %q, want it to say the request is larger than the limit of 500", e.Error.Message)
	}
}

func TestBadRequests(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string // in the message
	}{
		{"malformed JSON", `{"model":"gpt-4o-mini","messages":[`, "not valid JSON"},
		{"not JSON", `model=gpt-4o-mini`, "not valid JSON"},
		{"array", `[{"model":"gpt-4o-mini"}]`, "JSON object"},
		{"invalid UTF-8", "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", "UTF-8"},
		{"no model", `{"messages":[]}`, "model"},
		{"messages not an array", `{"model":"m","messages":"hi"}`, "messages"},
		{"negative cap", `{"model":"m","messages":[],"max_tokens":-1}`, "max_tokens"},
		{"zero cap", `{"model":"m","messages":[],"max_tokens":0}`, "max_tokens"},
		{"fractional cap", `{"model":"m","messages":[],"max_tokens":1.5}`, "max_tokens"},
		{"infinite cap", `{"model":"m","messages":[],"max_completion_tokens":1e309}`, "max_completion_tokens"},
		{"huge cap", `{"model":"m","messages":[],"max_tokens":2147483648}`, "max_tokens"},
		{"string cap", `{"model":"m","messages":[],"max_tokens":"100"}`, "max_tokens"},
		{"zero choices", `{"model":"m","messages":[],"n":0}`, "n must"},
		{"stream not bool", `{"model":"m","messages":[],"stream":"yes"}`, "stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
			called := false
			resp := r.envoy.Do(t.Context(), chatRequest("a", []byte(tt.body)), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				called = true
				return envoytest.UpstreamResponse{Status: 200}
			})
			wantStatus(t, resp, 400)
			if called {
				t.Errorf("upstream called for a bad request")
			}
			e := decodeError(t, resp.Body)
			if e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("error: got %q %q, want invalid_request_error mentioning %q", e.Error.Type, e.Error.Message, tt.want)
			}
			if got := r.used(t, "tenant-tokens", tenantA); got != 0 {
				t.Errorf("tokens reserved by a bad request: %d", got)
			}
		})
	}
}

func TestMissingIdentity(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
	req := chatRequest("", fixture(t, "openai/chat_request.json"))
	req.Headers = req.Headers[:1] // no x-tenant-id
	resp := r.envoy.Do(t.Context(), req, nil)
	wantStatus(t, resp, 401)
	e := decodeError(t, resp.Body)
	if e.Error.Type != "invalid_request_error" || e.Error.Code != "missing_identity" || !strings.Contains(e.Error.Message, "tenant") {
		t.Errorf("error: got %+v, want invalid_request_error/missing_identity naming tenant", e.Error)
	}
}

func TestIdentityTooLong(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
	resp := r.envoy.Do(t.Context(), chatRequest(strings.Repeat("x", extproc.MaxAttributeBytes+1), fixture(t, "openai/chat_request.json")), nil)
	wantStatus(t, resp, 400)
}

func TestOptionalIdentityMissingSkipsItsLimits(t *testing.T) {
	r := newRig(t, []accounting.Limit{
		tokensLimit("tenant-tokens", 100000, "tenant"),
		{Name: "user-rpm", Dimension: accounting.Requests, Scope: []string{"user"}, Limit: 1, Window: time.Minute},
	})
	body := fixture(t, "openai/chat_request.json")
	for i := range 3 {
		resp := r.envoy.Do(t.Context(), chatRequest("a", body), jsonUpstream(200, fixture(t, "openai/chat_response.json")))
		wantStatus(t, resp, 200)
		if v := resp.Header.Values("x-ratelimit-limit-requests"); len(v) != 0 {
			t.Errorf("request %d: a user-scoped limit applied without a user: %q", i, v)
		}
	}
}

func TestIdentityKeysDoNotCollide(t *testing.T) {
	r := newRig(t, []accounting.Limit{{Name: "pair-rpm", Dimension: accounting.Requests, Scope: []string{"tenant", "user"}, Limit: 1, Window: time.Minute}})
	for _, pair := range [][2]string{{"a:b", "c"}, {"a", "b:c"}, {"a:b:c", ""}} {
		req := chatRequest(pair[0], fixture(t, "openai/chat_request.json"))
		if pair[1] != "" {
			req.Headers = append(req.Headers, [2]string{"x-user-id", pair[1]})
		}
		resp := r.envoy.Do(t.Context(), req, jsonUpstream(200, fixture(t, "openai/chat_response.json")))
		wantStatus(t, resp, 200)
	}
}

func TestIdentityFromMetadataOnly(t *testing.T) {
	r := newRig(t, []accounting.Limit{{Name: "tenant-rpm", Dimension: accounting.Requests, Scope: []string{"tenant"}, Limit: 1, Window: time.Minute}},
		withServer(func(o *extproc.Options) {
			o.Identity = extproc.Identity{
				Attributes: []extproc.AttributeSource{{Name: "tenant", Metadata: &extproc.MetadataSource{
					Namespace: "envoy.filters.http.jwt_authn", Key: "payload", Path: []string{"org"}}}},
				Required: []string{"tenant"},
			}
		}))
	payload, _ := structpb.NewStruct(map[string]any{"org": "acme", "sub": "alice"})
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"envoy.filters.http.jwt_authn": {Fields: map[string]*structpb.Value{"payload": structpb.NewStructValue(payload)}},
	}}
	req := chatRequest("forged", fixture(t, "openai/chat_request.json"))
	req.Metadata = md
	wantStatus(t, r.envoy.Do(t.Context(), req, jsonUpstream(200, fixture(t, "openai/chat_response.json"))), 200)
	// A second request as acme trips the limit whatever header it sends.
	req.Headers = append(req.Headers, [2]string{"x-tenant-id", "other"})
	wantStatus(t, r.envoy.Do(t.Context(), req, nil), 429)
	// Without the verified claim, the header alone is not an identity.
	req.Metadata = nil
	wantStatus(t, r.envoy.Do(t.Context(), req, nil), 401)
}

// TestOtherPathsPassUntouched: a request on a path that is not an LLM
// API's is not tokenwarden's business — other applications behind the
// same proxy, reached through a filter that does not stop at the LLM
// routes. It needs no identity, reserves nothing, and reaches the upstream, and its response
// the client, as they were sent: Envoy is told to send nothing more of
// it. A path of an LLM API still needs its identity, with a body or
// without.
func TestOtherPathsPassUntouched(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRig(t, []accounting.Limit{
		{Name: "tenant-rpm", Dimension: accounting.Requests, Scope: []string{"tenant"}, Limit: 1, Window: time.Minute},
	}, withServer(func(o *extproc.Options) { o.Registerer = reg; o.StripAcceptEncoding = true }))
	upstreamHeaders := [][2]string{{"content-type", "application/json"}, {"x-ratelimit-remaining-requests", "7"}}
	tests := []struct {
		name string
		req  envoytest.Request
	}{
		{"no identity", envoytest.Request{Method: "GET", Path: "/v1/models"}},
		{"with identity", envoytest.Request{Method: "GET", Path: "/v1/models", Headers: [][2]string{{"x-tenant-id", "a"}}}},
		{"a body", envoytest.Request{Method: "POST", Path: "/app/orders",
			Headers: [][2]string{{"x-tenant-id", "a"}, {"accept-encoding", "gzip"}, {"content-type", "application/json"}},
			Body:    []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"not an LLM call"}]}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := r.envoy.Do(t.Context(), tt.req, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				return envoytest.UpstreamResponse{Status: 200, Headers: upstreamHeaders, Chunks: [][]byte{[]byte(`{"data":[]}`)}}
			})
			wantStatus(t, resp, 200)
			if resp.Upstream == nil {
				t.Fatal("the upstream was not called")
			}
			if got := string(resp.Upstream.Body); got != string(tt.req.Body) {
				t.Errorf("upstream body: got %q, want %q", got, tt.req.Body)
			}
			for _, h := range tt.req.Headers {
				if got := resp.Upstream.Header.Get(h[0]); got != h[1] {
					t.Errorf("upstream header %s: got %q, want %q", h[0], got, h[1])
				}
			}
			// The upstream's own rate-limit header, which tokenwarden
			// removes from the responses it processes, reaches the client.
			wantHeader(t, resp.Header, "x-ratelimit-remaining-requests", "7")
			if string(resp.Body) != `{"data":[]}` || len(resp.Metadata) != 0 {
				t.Errorf("response: body %s, metadata %v; want the upstream's body and no metadata", resp.Body, resp.Metadata)
			}
		})
	}
	a := accounting.Attributes{{Name: "tenant", Value: "a"}}
	if got := r.used(t, "tenant-rpm", a); got != 0 {
		t.Errorf("tenant-rpm used by requests that are not LLM calls: %d, want 0", got)
	}
	if got := gathered(t, reg, "tokenwarden_requests_total", "other", "passed"); got != float64(len(tests)) {
		t.Errorf(`tokenwarden_requests_total{api="other",outcome="passed"}: got %v, want %d`, got, len(tests))
	}
	for _, req := range []envoytest.Request{
		{Method: "GET", Path: "/v1/chat/completions"},
		chatRequest("", fixture(t, "openai/chat_request.json")),
	} {
		req.Headers = nil
		if resp := r.envoy.Do(t.Context(), req, nil); resp.Status != 401 || resp.Upstream != nil {
			t.Errorf("%s %s without identity: got %d (upstream called %v), want 401", req.Method, req.Path, resp.Status, resp.Upstream != nil)
		}
	}
}

// TestOtherPathsCountedWhenConfigured: with other_paths: count, a path
// that is not an LLM API's needs its identity and counts on the requests
// dimension only, under api "other".
func TestOtherPathsCountedWhenConfigured(t *testing.T) {
	r := newRig(t, []accounting.Limit{
		tokensLimit("tenant-tokens", 10, "tenant"), // already too small for any LLM call
		{Name: "tenant-rpm", Dimension: accounting.Requests, Scope: []string{"tenant"}, Limit: 2, Window: time.Minute},
	}, withServer(func(o *extproc.Options) { o.CountOtherPaths = true }))
	if resp := r.envoy.Do(t.Context(), envoytest.Request{Method: "GET", Path: "/v1/models"}, nil); resp.Status != 401 {
		t.Errorf("without identity: got %d, want 401", resp.Status)
	}
	req := envoytest.Request{Method: "GET", Path: "/v1/models", Headers: [][2]string{{"x-tenant-id", "a"}}}
	for i, want := range []int{200, 200, 429} {
		resp := r.envoy.Do(t.Context(), req, jsonUpstream(200, []byte(`{"data":[]}`)))
		wantStatus(t, resp, want)
		if want == 200 {
			wantHeader(t, resp.Header, "x-ratelimit-remaining-requests", strconv.Itoa(1-i))
			if string(resp.Body) != `{"data":[]}` {
				t.Errorf("body: got %s", resp.Body)
			}
		}
	}
	if got := r.used(t, "tenant-tokens", tenantA); got != 0 {
		t.Errorf("tokens used by non-LLM requests: %d", got)
	}
}

// failingStore is a store that cannot be reached.
type failingStore struct{}

func (failingStore) Reserve(context.Context, accounting.ReserveRequest) (accounting.ReserveResult, error) {
	return accounting.ReserveResult{}, fmt.Errorf("dial tcp: connection refused")
}
func (failingStore) Settle(context.Context, accounting.SettleRequest) error {
	return fmt.Errorf("dial tcp: connection refused")
}
func (failingStore) Release(context.Context, accounting.ReserveRequest) (bool, error) {
	return false, fmt.Errorf("dial tcp: connection refused")
}
func (failingStore) Ping(context.Context) error { return fmt.Errorf("dial tcp: connection refused") }

func TestStoreUnavailable(t *testing.T) {
	closed := tokensLimit("tenant-tokens", 100000, "tenant")
	open := accounting.Limit{Name: "tenant-rpm", Dimension: accounting.Requests, Scope: []string{"tenant"}, Limit: 10, Window: time.Minute, OnStoreError: accounting.FailOpen}
	t.Run("fail closed", func(t *testing.T) {
		r := newRig(t, []accounting.Limit{closed, open}, withStore(failingStore{}))
		resp := r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")), nil)
		wantStatus(t, resp, 503)
		wantHeader(t, resp.Header, "retry-after", "1")
		e := decodeError(t, resp.Body)
		if e.Error.Type != "server_error" || e.Error.Code != "limiter_unavailable" {
			t.Errorf("error: got %+v, want server_error/limiter_unavailable", e.Error)
		}
	})
	t.Run("fail open", func(t *testing.T) {
		r := newRig(t, []accounting.Limit{open}, withStore(failingStore{}))
		resp := r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")), jsonUpstream(200, fixture(t, "openai/chat_response.json")))
		wantStatus(t, resp, 200)
	})
}

// TestConcurrentRequestsNeverOvershoot holds every admitted request at
// the upstream until all have been decided, so that no settlement can
// free budget in between: the admitted estimates must fit the limit, and
// fill it.
func TestConcurrentRequestsNeverOvershoot(t *testing.T) {
	const k = 60
	body := []byte(`{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":"What is a PDU session?"}]}`)
	// Learn the estimate from the remaining budget after one request.
	const fits = 7
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1<<40, "tenant")})
	resp := r.envoy.Do(t.Context(), chatRequest("a", body), jsonUpstream(200, []byte(`{}`)))
	remaining, err := strconv.ParseInt(resp.Header.Get("x-ratelimit-remaining-tokens"), 10, 64)
	if err != nil {
		t.Fatalf("x-ratelimit-remaining-tokens: %v", err)
	}
	est := int64(1<<40) - remaining
	limit := est*fits + est/2

	r = newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", limit, "tenant")})
	var decided, admitted atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	markDecided := func() {
		if decided.Add(1) == k {
			once.Do(func() { close(release) })
		}
	}
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			resp := r.envoy.Do(context.Background(), chatRequest("a", body), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				admitted.Add(1)
				markDecided()
				<-release
				return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "application/json"}},
					Chunks: [][]byte{[]byte(`{"usage":{"prompt_tokens":15,"completion_tokens":85}}`)}}
			})
			if resp.Status == 429 {
				markDecided()
			} else if resp.Status != 200 {
				t.Errorf("status %d: %s %v", resp.Status, resp.Body, resp.Err)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != fits {
		t.Errorf("admitted: got %d, want exactly %d (estimate %d, limit %d)", got, fits, est, limit)
	}
	if got, want := r.used(t, "tenant-tokens", tenantA), admitted.Load()*100; got != want {
		t.Errorf("tokens used after all settled: got %d, want the sum of usage %d", got, want)
	}
}
