package extproc_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// learnedChat asks for the rig's default cap, 1000, which the server
// injects.
var learnedChat = []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)

// completion answers with usage of 10 input and out output tokens.
func completion(out int64) envoytest.Upstream { return usageOf(10, out) }

// usageOf answers with usage of in input and out output tokens.
func usageOf(in, out int64) envoytest.Upstream {
	return jsonUpstream(200, fmt.Appendf(nil, `{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out))
}

// withLearning turns learned output estimates on after five samples, and
// registers the server's metrics in reg.
func withLearning(reg *prometheus.Registry) rigOption {
	return withServer(func(o *extproc.Options) {
		o.LearnedOutput = extproc.LearnedOutput{Enabled: true, MinSamples: 5, Floor: 16}
		o.Registerer = reg
	})
}

// reservedTokens returns the tokens a response's request reserved, from
// the metadata Envoy logs.
func reservedTokens(t *testing.T, resp *envoytest.Response) int64 {
	t.Helper()
	v, ok := resp.Metadata[extproc.MetadataNamespace]["estimate_tokens"].(float64)
	if !ok {
		t.Fatalf("no estimate_tokens in %v", resp.Metadata)
	}
	return int64(v)
}

// TestLearnedOutputShrinksTheReservation: after min_samples short
// completions the reservation holds what they produce, not the cap; the
// cap still goes to the provider, a long completion is charged in full,
// and a request settled without a usage report is charged its cap.
func TestLearnedOutputShrinksTheReservation(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1_000_000, "tenant")}, withLearning(reg))
	var input int64
	for i := range 5 {
		resp := r.envoy.Do(t.Context(), chatRequest("a", learnedChat), completion(20))
		wantStatus(t, resp, 200)
		input = reservedTokens(t, resp) - 1000
		if input <= 0 || input > 20 {
			t.Fatalf("request %d reserved %d: want its input and the whole cap of 1000", i, reservedTokens(t, resp))
		}
	}
	used := r.used(t, "tenant-tokens", tenantA)
	if used != 5*30 {
		t.Fatalf("used after five completions: got %d, want their usage 150", used)
	}

	// No usage report (the client left before the response): the
	// reservation held the learned 20, and the whole cap is charged, as
	// without learning. Nothing is learned from it.
	resp := r.envoy.Do(t.Context(), chatRequest("a", learnedChat), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		return envoytest.UpstreamResponse{CutBeforeHeaders: true}
	})
	r.envoy.Wait()
	if got := reservedTokens(t, resp); got != input+20 {
		t.Errorf("reserved after five 20-token completions: got %d, want %d (input %d + 20)", got, input+20, input)
	}
	if got, want := r.used(t, "tenant-tokens", tenantA), used+input+1000; got != want {
		t.Errorf("used after a request cut before its response: got %d, want %d (input + the whole cap)", got, want)
	}
	used = r.used(t, "tenant-tokens", tenantA)

	// Learned: 20 tokens (20 is a bucket's upper bound), not 1000.
	resp = r.envoy.Do(t.Context(), chatRequest("a", learnedChat), completion(1000))
	wantStatus(t, resp, 200)
	if got := reservedTokens(t, resp); got != input+20 {
		t.Errorf("reserved after five 20-token completions: got %d, want %d (input %d + 20)", got, input+20, input)
	}
	if !strings.Contains(string(resp.Upstream.Body), `"max_tokens":1000`) {
		t.Errorf("the provider was not sent the whole cap: %s", resp.Upstream.Body)
	}
	// The long completion is charged what it used.
	if got, want := r.used(t, "tenant-tokens", tenantA), used+1010; got != want {
		t.Errorf("used after a 1000-token completion: got %d, want %d", got, want)
	}
	if got := gathered(t, reg, "tokenwarden_learned_output_overshoot_tokens_total"); got != 980 {
		t.Errorf("overshoot counted: got %v, want 980", got)
	}
	for use, want := range map[string]float64{"warming": 5, "learned": 2} {
		if got := gathered(t, reg, "tokenwarden_learned_output_requests_total", use); got != want {
			t.Errorf("tokenwarden_learned_output_requests_total{estimate=%q}: got %v, want %v", use, got, want)
		}
	}
	if got := gathered(t, reg, "tokenwarden_learned_output_keys"); got != 1 {
		t.Errorf("tokenwarden_learned_output_keys: got %v, want 1", got)
	}
}

// TestLearnedOutputOvershoot shows the worst case: k requests in flight
// at once, each reserving its input and the learned 20 tokens on a limit
// that holds exactly k such reservations, each then producing its whole
// cap of 1000. The window is overspent by k × (cap − learned), the bound
// the docs state: settlement charged the truth, and the tenant's next
// request waits for the window. (The provider reports the input as
// estimated, so that the figure is the output's alone; an input estimate
// that falls short adds its shortfall with or without learning.)
func TestLearnedOutputOvershoot(t *testing.T) {
	const cap, learned = 1000, 20
	for _, k := range []int64{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("%d in flight", k), func(t *testing.T) {
			r := newRig(t, nil, withLearning(prometheus.NewRegistry()))
			// Learn from another tenant: the estimate is per model and API.
			var input int64
			for range 5 {
				resp := r.envoy.Do(t.Context(), chatRequest("trainer", learnedChat), completion(learned))
				wantStatus(t, resp, 200)
				input = reservedTokens(t, resp) - cap
			}
			limit := k * (input + learned)
			// Tenant a's alone: the trainer is not held to it.
			l := tokensLimit("tenant-tokens", limit, "tenant")
			l.Match = map[string]string{"tenant": "a"}
			r = r.withLimits(t, []accounting.Limit{l})
			// The new rig shares nothing: learn again.
			for range 5 {
				wantStatus(t, r.envoy.Do(t.Context(), chatRequest("trainer", learnedChat), completion(learned)), 200)
			}

			var arrived atomic.Int64
			release := make(chan struct{})
			var once sync.Once
			var wg sync.WaitGroup
			for range k {
				wg.Go(func() {
					resp := r.envoy.Do(context.Background(), chatRequest("a", learnedChat), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
						// Every request is admitted before any settles.
						if arrived.Add(1) == k {
							once.Do(func() { close(release) })
						}
						<-release
						return usageOf(input, cap)(nil)
					})
					if resp.Status != 200 {
						t.Errorf("status %d: %s %v", resp.Status, resp.Body, resp.Err)
					}
				})
			}
			wg.Wait()
			used := r.used(t, "tenant-tokens", tenantA)
			overshoot, bound := used-limit, k*(cap-learned)
			t.Logf("k=%d: limit %d, used %d, overshoot %d, bound k×(cap−learned) = %d", k, limit, used, overshoot, bound)
			if used != k*(input+cap) {
				t.Errorf("used: got %d, want every completion charged in full, %d", used, k*(input+cap))
			}
			if overshoot != bound {
				t.Errorf("overshoot: got %d, want the bound %d", overshoot, bound)
			}
			wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", learnedChat), nil), 429)
		})
	}
}

// withLimits returns a fresh rig like r's, learning on, with limits.
func (r *rig) withLimits(t *testing.T, limits []accounting.Limit) *rig {
	t.Helper()
	return newRig(t, limits, withLearning(prometheus.NewRegistry()))
}

// TestLearnedOutputScope: with a scope, one tenant's short completions do
// not shrink another tenant's reservations.
func TestLearnedOutputScope(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1_000_000, "tenant")}, withServer(func(o *extproc.Options) {
		o.LearnedOutput = extproc.LearnedOutput{Enabled: true, MinSamples: 5, Floor: 16, Scope: []string{"tenant"}}
	}))
	for range 5 {
		wantStatus(t, r.envoy.Do(t.Context(), chatRequest("short", learnedChat), completion(20)), 200)
	}
	short := reservedTokens(t, r.envoy.Do(t.Context(), chatRequest("short", learnedChat), completion(20)))
	other := reservedTokens(t, r.envoy.Do(t.Context(), chatRequest("other", learnedChat), completion(20)))
	if other-short != 1000-20 {
		t.Errorf("reserved: the learning tenant %d, another %d; want the other to reserve the whole cap, 980 more", short, other)
	}
}

// TestLearnedOutputScopeAbsent: a request without the scope's attribute
// is not learned from and reserves its cap, as a limit does not hold a
// request without its scope; such requests do not pool into one
// estimate.
func TestLearnedOutputScopeAbsent(t *testing.T) {
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 1_000_000, "tenant")}, withServer(func(o *extproc.Options) {
		o.LearnedOutput = extproc.LearnedOutput{Enabled: true, MinSamples: 5, Floor: 16, Scope: []string{"team"}}
	}))
	first := reservedTokens(t, r.envoy.Do(t.Context(), chatRequest("a", learnedChat), completion(20)))
	for range 6 {
		wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", learnedChat), completion(20)), 200)
	}
	if got := reservedTokens(t, r.envoy.Do(t.Context(), chatRequest("a", learnedChat), completion(20))); got != first {
		t.Errorf("reserved after seven completions without a team: got %d, want %d (the cap)", got, first)
	}
}
