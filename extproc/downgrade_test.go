package extproc_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// downgradeLimits: a tenant's first gpt-4o request of the hour goes to
// gpt-4o, the rest to gpt-4o-mini; the same for gemini-2.5-pro and
// gemini-2.5-flash. Every model has a token budget of its own per
// tenant, which shows where each request was charged.
func downgradeLimits() []accounting.Limit {
	one := func(name, from, to string) accounting.Limit {
		return accounting.Limit{Name: name, Dimension: accounting.Requests, Scope: []string{"tenant"},
			Match: map[string]string{"model": from}, Algorithm: accounting.FixedWindow, Limit: 1, Window: time.Hour,
			OnExhausted: accounting.OnExhausted{DowngradeTo: to}}
	}
	return []accounting.Limit{
		one("4o-hourly", "gpt-4o", "gpt-4o-mini"),
		one("pro-hourly", "gemini-2.5-pro", "gemini-2.5-flash"),
		tokensLimit("tokens-per-model", 1_000_000, "tenant", "model"),
	}
}

// modelUsed is what tokens-per-model holds for tenant a on model.
func (r *rig) modelUsed(t *testing.T, model string) int64 {
	return r.used(t, "tokens-per-model", accounting.Attributes{{Name: "tenant", Value: "a"}, {Name: "model", Value: model}})
}

// TestDowngradeChat: once gpt-4o's limit is spent, a gpt-4o request is
// sent to gpt-4o-mini: its body names the fallback (and nothing else of
// it changes), the routing header names it and the route cache is
// cleared, the response says so, and the reservation and settlement are
// the fallback's.
func TestDowngradeChat(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRig(t, downgradeLimits(), withRegistry(reg))
	body := `{"messages":[{"role":"user","content":"say gpt-4o"}], "model": "gpt-4o" ,"max_tokens":50}`
	answer := []byte(`{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`)

	var first *envoytest.UpstreamRequest
	resp := r.envoy.Do(t.Context(), chatRequest("a", []byte(body)), func(u *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		first = u
		return jsonUpstream(200, answer)(u)
	})
	wantStatus(t, resp, 200)
	if string(first.Body) != body || first.Header.Get(extproc.RouteModelHeader) != "" || first.RouteCleared {
		t.Errorf("the admitted request was edited: body %s, %s %q, route cleared %v", first.Body,
			extproc.RouteModelHeader, first.Header.Get(extproc.RouteModelHeader), first.RouteCleared)
	}
	if v := resp.Header.Values(extproc.DowngradedHeader); len(v) != 0 {
		t.Errorf("%s on a request that was not downgraded: %q", extproc.DowngradedHeader, v)
	}

	var second *envoytest.UpstreamRequest
	resp = r.envoy.Do(t.Context(), chatRequest("a", []byte(body)), func(u *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		second = u
		return jsonUpstream(200, answer)(u)
	})
	wantStatus(t, resp, 200)
	if second == nil {
		t.Fatal("the downgraded request did not reach the upstream")
	}
	want := strings.Replace(body, `"gpt-4o"`, `"gpt-4o-mini"`, 1)
	if string(second.Body) != want {
		t.Errorf("upstream body:\ngot  %s\nwant %s", second.Body, want)
	}
	wantHeader(t, second.Header, extproc.RouteModelHeader, "gpt-4o-mini")
	wantHeader(t, second.Header, ":path", "/v1/chat/completions")
	if !second.RouteCleared {
		t.Error("the route cache was not cleared: Envoy would route on the headers as they were")
	}
	wantHeader(t, resp.Header, extproc.DowngradedHeader, "gpt-4o->gpt-4o-mini")
	md := resp.Metadata[extproc.MetadataNamespace]
	for k, v := range map[string]any{extproc.MetaDecision: "downgraded", extproc.MetaDowngradedFrom: "gpt-4o",
		extproc.MetaModel: "gpt-4o-mini", extproc.MetaLimit: "4o-hourly", extproc.MetaActualTokens: 25.0} {
		if md[k] != v {
			t.Errorf("metadata %s: got %v, want %v", k, md[k], v)
		}
	}
	// Settled: each model's budget holds its own request's usage.
	if got := r.modelUsed(t, "gpt-4o"); got != 25 {
		t.Errorf("gpt-4o tokens: got %d, want 25", got)
	}
	if got := r.modelUsed(t, "gpt-4o-mini"); got != 25 {
		t.Errorf("gpt-4o-mini tokens: got %d, want 25", got)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tokenwarden_requests_total", []string{"openai.chat", "admitted"}, 1},
		{"tokenwarden_requests_total", []string{"openai.chat", "downgraded"}, 1},
		{"tokenwarden_downgrades_total", []string{"4o-hourly"}, 1},
		{"tokenwarden_rejections_total", []string{"4o-hourly"}, 0},
	} {
		if got := gathered(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v: got %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// TestDowngradeStream: a streamed response from the fallback settles on
// the fallback, on the usage it reports.
func TestDowngradeStream(t *testing.T) {
	r := newRig(t, downgradeLimits())
	body := []byte(`{"model":"gpt-4o","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", body), jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))), 200)
	var seen []byte
	stream := fixture(t, "openai/chat_stream_usage.sse")
	resp := r.envoy.Do(t.Context(), chatRequest("a", body), func(u *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		seen = u.Body
		return sseUpstream(stream, 97, -1)(u)
	})
	wantStatus(t, resp, 200)
	if !bytes.Contains(seen, []byte(`"model":"gpt-4o-mini"`)) || bytes.Count(seen, []byte("gpt-4o")) != 1 {
		t.Errorf("upstream body: got %s, want gpt-4o-mini named once", seen)
	}
	if !bytes.Equal(resp.Body, stream) {
		t.Error("the stream did not reach the client unchanged")
	}
	wantHeader(t, resp.Header, extproc.DowngradedHeader, "gpt-4o->gpt-4o-mini")
	if got := r.modelUsed(t, "gpt-4o-mini"); got != 224 {
		t.Errorf("gpt-4o-mini tokens: got %d, want the stream's 224", got)
	}
}

// TestDowngradeGeminiPath: Gemini names the model in the path, so the
// downgrade rewrites :path and leaves the body as it is.
func TestDowngradeGeminiPath(t *testing.T) {
	r := newRig(t, downgradeLimits())
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":50}}`)
	req := envoytest.Request{Path: "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
		Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", "a"}}, Body: body}
	answer := []byte(`{"candidates":[],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4,"totalTokenCount":7}}`)
	wantStatus(t, r.envoy.Do(t.Context(), req, jsonUpstream(200, answer)), 200)
	var up *envoytest.UpstreamRequest
	resp := r.envoy.Do(t.Context(), req, func(u *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		up = u
		return jsonUpstream(200, answer)(u)
	})
	wantStatus(t, resp, 200)
	wantHeader(t, up.Header, ":path", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
	wantHeader(t, up.Header, extproc.RouteModelHeader, "gemini-2.5-flash")
	if !up.RouteCleared {
		t.Error("the route cache was not cleared")
	}
	if !bytes.Equal(up.Body, body) {
		t.Errorf("upstream body: got %s, want it unchanged", up.Body)
	}
	wantHeader(t, resp.Header, extproc.DowngradedHeader, "gemini-2.5-pro->gemini-2.5-flash")
	if got := r.modelUsed(t, "gemini-2.5-flash"); got != 7 {
		t.Errorf("gemini-2.5-flash tokens: got %d, want 7", got)
	}
}

// TestDowngradeStreamedBody: with a STREAMED request body the headers
// are gone before the decision, so a body model is downgraded without
// the routing header, and a path model cannot be: its request gets the
// 429.
func TestDowngradeStreamedBody(t *testing.T) {
	r := newRig(t, downgradeLimits())
	r.envoy.Filter = envoytest.Filter{RequestBody: envoytest.Streamed}
	body := []byte(`{"model":"gpt-4o","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
	chunks := func(b []byte) [][]byte { return [][]byte{b[:20], b[20:]} }
	answer := jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	chat := chatRequest("a", nil)
	chat.Chunks = chunks(body)
	wantStatus(t, r.envoy.Do(t.Context(), chat, answer), 200)
	var up *envoytest.UpstreamRequest
	resp := r.envoy.Do(t.Context(), chat, func(u *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		up = u
		return answer(u)
	})
	wantStatus(t, resp, 200)
	if want := strings.Replace(string(body), "gpt-4o", "gpt-4o-mini", 1); string(up.Body) != want {
		t.Errorf("upstream body: got %s, want %s", up.Body, want)
	}
	if v := up.Header.Values(extproc.RouteModelHeader); len(v) != 0 || up.RouteCleared {
		t.Errorf("a STREAMED body's reply set %s %q, route cleared %v", extproc.RouteModelHeader, v, up.RouteCleared)
	}
	wantHeader(t, resp.Header, extproc.DowngradedHeader, "gpt-4o->gpt-4o-mini")

	gem := envoytest.Request{Path: "/v1beta/models/gemini-2.5-pro:generateContent",
		Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", "a"}},
		Chunks:  chunks([]byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))}
	wantStatus(t, r.envoy.Do(t.Context(), gem, jsonUpstream(200, []byte(`{"candidates":[]}`))), 200)
	resp = r.envoy.Do(t.Context(), gem, nil)
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "pro-hourly")
}

// TestDowngradeRefused: with the fallback's own limit spent too, the
// reply is the 429 of the model the client named.
func TestDowngradeRefused(t *testing.T) {
	limits := append(downgradeLimits(), accounting.Limit{Name: "mini-hourly", Dimension: accounting.Requests, Scope: []string{"tenant"},
		Match: map[string]string{"model": "gpt-4o-mini"}, Algorithm: accounting.FixedWindow, Limit: 1, Window: time.Hour})
	r := newRig(t, limits)
	req := func(model string) envoytest.Request {
		return chatRequest("a", []byte(`{"model":"`+model+`","max_tokens":50,"messages":[]}`))
	}
	ok := jsonUpstream(200, []byte(`{"choices":[]}`))
	wantStatus(t, r.envoy.Do(t.Context(), req("gpt-4o"), ok), 200)
	wantStatus(t, r.envoy.Do(t.Context(), req("gpt-4o-mini"), ok), 200)
	resp := r.envoy.Do(t.Context(), req("gpt-4o"), nil)
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "4o-hourly")
	if v := resp.Header.Values(extproc.DowngradedHeader); len(v) != 0 {
		t.Errorf("%s on a 429: %q", extproc.DowngradedHeader, v)
	}
}

// failAfter is a store that answers n reservations and fails the rest,
// as a store that goes away between a refusal and its fallback's
// reservation.
type failAfter struct {
	accounting.Store
	n atomic.Int32
}

func (f *failAfter) Reserve(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
	if f.n.Add(-1) < 0 {
		return accounting.ReserveResult{}, fmt.Errorf("%w: %w: connection refused", accounting.ErrStoreUnavailable, accounting.ErrNotApplied)
	}
	return f.Store.Reserve(ctx, req)
}

// TestDowngradeStoreFails: the store fails on the fallback's
// reservation. The fallback's limits decide, as for any request: a 503
// when one fails closed (the token budget), the downgrade admitted
// unreserved when all fail open, counted as failed_open.
func TestDowngradeStoreFails(t *testing.T) {
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail open %v", open), func(t *testing.T) {
			// The fallback's limit is the token budget, which fails
			// closed unless told.
			limits := downgradeLimits()
			for i := range limits {
				if open || i == 0 {
					limits[i].OnStoreError = accounting.FailOpen
				}
			}
			store := &failAfter{Store: memstore.New(memstore.Options{})}
			store.n.Store(2) // the first request, and the second's refusal
			reg := prometheus.NewRegistry()
			r := newRig(t, limits, withStore(store), withRegistry(reg))
			body := []byte(`{"model":"gpt-4o","max_tokens":50,"messages":[]}`)
			ok := jsonUpstream(200, []byte(`{"choices":[]}`))
			wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", body), ok), 200)
			var up *envoytest.UpstreamRequest
			resp := r.envoy.Do(t.Context(), chatRequest("a", body), func(u *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				up = u
				return ok(u)
			})
			if !open {
				wantStatus(t, resp, 503)
				if up != nil {
					t.Error("the request reached the upstream")
				}
				if got := gathered(t, reg, "tokenwarden_requests_total", "openai.chat", "unavailable"); got != 1 {
					t.Errorf("unavailable: got %v, want 1", got)
				}
				return
			}
			wantStatus(t, resp, 200)
			if up == nil || !bytes.Contains(up.Body, []byte(`"gpt-4o-mini"`)) {
				t.Errorf("upstream request: got %v, want the fallback's", up)
			}
			wantHeader(t, resp.Header, extproc.DowngradedHeader, "gpt-4o->gpt-4o-mini")
			if got := gathered(t, reg, "tokenwarden_requests_total", "openai.chat", "failed_open"); got != 1 {
				t.Errorf("failed_open: got %v, want 1", got)
			}
		})
	}
}

// TestDowngradeLearnsTheFallback: with learned output estimates, what a
// downgraded request generates is learned for the fallback model, whose
// next request reserves it, not for the model the client named.
func TestDowngradeLearnsTheFallback(t *testing.T) {
	r := newRig(t, downgradeLimits(), withServer(func(o *extproc.Options) {
		o.LearnedOutput = extproc.LearnedOutput{Enabled: true, MinSamples: 1, Floor: 1}
	}))
	body := func(model string) []byte {
		return []byte(`{"model":"` + model + `","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`)
	}
	answer := jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`))
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", body("gpt-4o")), answer), 200)
	resp := r.envoy.Do(t.Context(), chatRequest("a", body("gpt-4o")), answer)
	wantHeader(t, resp.Header, extproc.DowngradedHeader, "gpt-4o->gpt-4o-mini")
	r.envoy.Wait()
	// gpt-4o-mini has seen one 20-token completion, the downgraded one.
	resp = r.envoy.Do(t.Context(), chatRequest("b", body("gpt-4o-mini")), answer)
	if got := reservedTokens(t, resp); got >= 1000 {
		t.Errorf("gpt-4o-mini reserved %d: want its input and the learned 20, not the cap of 1000", got)
	}
}

// TestDowngradeShowsAHeaderSafeModel: the model a client named reaches
// the response header and the access log only as a short run of
// printable ASCII; a name that is gpt-4o to the limits but carries a
// line break, or a prefix longer than MaxModelBytes, is shown as its family.
func TestDowngradeShowsAHeaderSafeModel(t *testing.T) {
	answer := []byte(`{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`)
	for _, tt := range []struct {
		name, model, want string
	}{
		{"snapshot", "gpt-4o-2024-08-06", "gpt-4o-2024-08-06"},
		{"line break", "x\r\nx-evil: 1/gpt-4o", "gpt-4o"},
		{"long prefix", strings.Repeat("p", 1000) + "/gpt-4o", "gpt-4o"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, downgradeLimits())
			body := fmt.Appendf(nil, `{"messages":[{"role":"user","content":"hi"}],"model":%q,"max_tokens":50}`, tt.model)
			wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", body), jsonUpstream(200, answer)), 200)
			resp := r.envoy.Do(t.Context(), chatRequest("a", body), jsonUpstream(200, answer))
			wantStatus(t, resp, 200)
			wantHeader(t, resp.Header, extproc.DowngradedHeader, tt.want+"->gpt-4o-mini")
			if got := resp.Metadata[extproc.MetadataNamespace][extproc.MetaDowngradedFrom]; got != tt.want {
				t.Errorf("metadata %s: got %.80q, want %q", extproc.MetaDowngradedFrom, got, tt.want)
			}
		})
	}
}
