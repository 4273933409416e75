package extproc_test

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// TestWaitThenDowngrade: a limit with both on_exhausted.wait_up_to and
// downgrade_to, one gpt-4o request a second per tenant that waits up to
// 800ms. The store's clock starts half a second into a window. Of a
// burst of three, one is admitted at once; the two others wait, since
// the window opens in 500ms. When it opens the first in the queue is
// admitted on gpt-4o, the model its client asked for; the last is
// refused until the window after, past its wait, and is sent to
// gpt-4o-mini instead of a 429: held first (its message timeout
// extended), then downgraded. No request is refused, and each counts
// once.
func TestWaitThenDowngrade(t *testing.T) {
	t0, base := time.Now(), time.Unix(1_000_000, int64(500*time.Millisecond))
	store := memstore.New(memstore.Options{Now: func() time.Time { return base.Add(time.Since(t0)) }})
	reg := prometheus.NewRegistry()
	limits := []accounting.Limit{
		{Name: "4o-rps", Dimension: accounting.Requests, Scope: []string{"tenant"}, Match: map[string]string{"model": "gpt-4o"},
			Algorithm: accounting.FixedWindow, Limit: 1, Window: time.Second,
			OnExhausted: accounting.OnExhausted{WaitUpTo: 800 * time.Millisecond, DowngradeTo: "gpt-4o-mini"}},
		tokensLimit("tokens-per-model", 1_000_000, "tenant", "model"),
	}
	r := newRig(t, limits, withStore(store), withRegistry(reg))
	body := []byte(`{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	answer := []byte(`{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`)

	first := r.envoy.Do(t.Context(), chatRequest("a", body), jsonUpstream(200, answer))
	wantStatus(t, first, 200)
	var (
		wg    sync.WaitGroup
		resps [2]*envoytest.Response
		ups   [2]*envoytest.UpstreamRequest
	)
	for i := range resps {
		wg.Go(func() {
			resps[i] = r.envoy.Do(t.Context(), chatRequest("a", body), func(u *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				ups[i] = u
				return jsonUpstream(200, answer)(u)
			})
		})
	}
	wg.Wait()
	r.envoy.Wait()

	models := map[string]int{}
	for i, resp := range resps {
		wantStatus(t, resp, 200)
		if ups[i] == nil {
			t.Fatalf("request %d did not reach the upstream", i)
		}
		// Both were held: each asked Envoy for its wait.
		if want := 800*time.Millisecond + accounting.WaitMargin; len(resp.TimeoutOverrides) != 1 || resp.TimeoutOverrides[0] != want {
			t.Errorf("request %d: overrides %v, want [%v]", i, resp.TimeoutOverrides, want)
		}
		md := resp.Metadata[extproc.MetadataNamespace]
		if got, _ := md[extproc.MetaWaitSeconds].(float64); got <= 0 {
			t.Errorf("request %d: %s %v, want how long it was held", i, extproc.MetaWaitSeconds, md[extproc.MetaWaitSeconds])
		}
		model := ups[i].Header.Get(extproc.RouteModelHeader)
		if model == "" {
			model = "gpt-4o"
		}
		models[model]++
		if model != "gpt-4o-mini" {
			continue
		}
		wantHeader(t, resp.Header, extproc.DowngradedHeader, "gpt-4o->gpt-4o-mini")
		if !ups[i].RouteCleared {
			t.Errorf("request %d: downgraded without clearing the route cache", i)
		}
		for k, v := range map[string]any{extproc.MetaDecision: "downgraded", extproc.MetaDowngradedFrom: "gpt-4o",
			extproc.MetaModel: "gpt-4o-mini", extproc.MetaLimit: "4o-rps"} {
			if md[k] != v {
				t.Errorf("request %d: metadata %s: got %v, want %v", i, k, md[k], v)
			}
		}
	}
	if models["gpt-4o"] != 1 || models["gpt-4o-mini"] != 1 {
		t.Errorf("the held requests went to %v, want one to gpt-4o (its wait served it), one to gpt-4o-mini", models)
	}
	// Settled where each was admitted: two on gpt-4o, one on the fallback.
	if got := r.modelUsed(t, "gpt-4o"); got != 50 {
		t.Errorf("gpt-4o tokens: got %d, want 50", got)
	}
	if got := r.modelUsed(t, "gpt-4o-mini"); got != 25 {
		t.Errorf("gpt-4o-mini tokens: got %d, want 25", got)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tokenwarden_requests_total", []string{"openai.chat", "admitted"}, 2},
		{"tokenwarden_requests_total", []string{"openai.chat", "downgraded"}, 1},
		{"tokenwarden_requests_total", []string{"openai.chat", "rejected"}, 0},
		{"tokenwarden_rejections_total", []string{"4o-rps"}, 0},
		{"tokenwarden_downgrades_total", []string{"4o-rps"}, 1},
		{"tokenwarden_waited_total", []string{"admitted"}, 1},
		{"tokenwarden_waited_total", []string{"timed_out"}, 1},
	} {
		if got := gathered(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v: got %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// TestDowngradeTierAndProvider: a downgraded request is held to the
// fallback's limits as any request naming the fallback is, reserve_for
// included, and the provider's answer corrects the provider limit
// through the reservation it was admitted on, the fallback's.
func TestDowngradeTierAndProvider(t *testing.T) {
	reg := prometheus.NewRegistry()
	fourO := accounting.Limit{Name: "4o-hourly", Dimension: accounting.Requests, Scope: []string{"tenant"},
		Match: map[string]string{"model": "gpt-4o"}, Algorithm: accounting.FixedWindow, Limit: 1, Window: time.Hour,
		OnExhausted: accounting.OnExhausted{DowngradeTo: "gpt-4o-mini"}}
	// gpt-4o-mini: 2000 tokens an hour, 1000 of them kept for the
	// interactive tier; each request reserves about 1010.
	mini := tokensLimit("mini-tiered", 2000)
	mini.Match = map[string]string{"model": "gpt-4o-mini"}
	mini.ReserveFor = &accounting.ReserveFor{Attribute: "priority", Value: "interactive", Share: 0.5}
	r := newRig(t, []accounting.Limit{fourO, mini, providerTPM}, withRegistry(reg),
		withServer(withPriority), withServer(withProvider))
	body := []byte(`{"model":"gpt-4o","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`)
	req := func(tenant, priority string) envoytest.Request {
		req := chatRequest(tenant, body)
		req.Headers = append(req.Headers, [2]string{"x-priority", priority}, [2]string{"x-provider", "openai-main"})
		return req
	}
	wantStatus(t, r.envoy.Do(t.Context(), req("a", "batch"), jsonUpstream(200, usage1010)), 200)

	// Batch on the fallback: held to the 1000 tokens not kept, which a
	// 1010-token request does not fit. The 429 is gpt-4o's.
	resp := r.envoy.Do(t.Context(), req("a", "batch"), jsonUpstream(200, usage1010))
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "4o-hourly")

	// Interactive on the fallback: the whole 2000. The provider answers
	// with less left than the counter holds: the provider limit is
	// corrected through the downgraded request's reservation.
	resp = r.envoy.Do(t.Context(), req("a", "interactive"),
		jsonUpstream(200, usage1010, [2]string{"x-ratelimit-remaining-tokens", "4000"}, [2]string{"x-ratelimit-limit-tokens", "30000000"}))
	wantStatus(t, resp, 200)
	wantHeader(t, resp.Header, extproc.DowngradedHeader, "gpt-4o->gpt-4o-mini")
	r.envoy.Wait()
	if used := r.used(t, "provider-tpm", onAccount("openai-main", "gpt-4o-mini")); used != 6000 {
		t.Errorf("provider counter: %d used, want 6000 (corrected to the provider's 4000 left)", used)
	}
	if used := r.used(t, "mini-tiered", nil); used != 1010 {
		t.Errorf("gpt-4o-mini's counter: %d used, want 1010 (the interactive request)", used)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tokenwarden_requests_total", []string{"openai.chat", "admitted"}, 1},
		{"tokenwarden_requests_total", []string{"openai.chat", "downgraded"}, 1},
		{"tokenwarden_requests_total", []string{"openai.chat", "rejected"}, 1},
		{"tokenwarden_rejections_total", []string{"4o-hourly"}, 1},
		{"tokenwarden_downgrades_total", []string{"4o-hourly"}, 1},
	} {
		if got := gathered(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v: got %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
