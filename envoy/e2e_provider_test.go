package envoy

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// e2eRigRequestAttributes has the rig's ext_proc filter send the upstream
// cluster's name and the provider account its default route's metadata
// names with the request headers (request_attributes), which the e2e
// config reads as the cluster and account attributes: the ways a provider
// limit keys an account by the route. The shipped envoy.yaml asks for
// neither; a deployment with provider limits adds what it uses.
func e2eRigRequestAttributes(t *testing.T) func(doc map[string]any) {
	return func(doc map[string]any) {
		hcm := path(t, doc, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config")
		ep := path(t, named(t, path(t, hcm, "http_filters"), extProcFilter), "typed_config").(map[string]any)
		ep["request_attributes"] = []any{"xds.cluster_name", e2eRouteAccountExpr}
		// The default route names the provider account in its metadata.
		vh := named(t, path(t, hcm, "route_config", "virtual_hosts"), "llm")
		routes := vh["routes"].([]any)
		last := routes[len(routes)-1].(map[string]any)
		last["metadata"] = map[string]any{"filter_metadata": map[string]any{"tokenwarden": map[string]any{"provider": e2eRouteAccount}}}
	}
}

// e2eRouteAccountExpr reads the provider account the route's metadata
// names, as a CEL expression in request_attributes: Envoy sends its value
// under the expression's text.
const (
	e2eRouteAccountExpr = "xds.route_metadata.filter_metadata['tokenwarden']['provider']"
	e2eRouteAccount     = "e2e-route-account"
)

// TestE2EProviderLimits: through the real Envoy and fakellm, limits scoped
// by a provider account (e2e-provider-*, for the callers that name one in
// x-e2e-provider) follow what the provider says. Its remaining figure,
// below the counter's, is charged, so the next request to that account is
// refused; its 429 blocks the account for every tenant at once, while the
// caller that met it gets the provider's own 429 and another account goes
// on. Envoy sends the upstream cluster's name and the account the route's
// metadata names with the request headers, which key e2e-provider-cluster.
func TestE2EProviderLimits(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	a, b := newE2ECaller(t), newE2ECaller(t)
	chat := e2eChat(t, "Hello there.", 50, false)
	on := func(provider string, more ...string) []string {
		return append([]string{"x-e2e-provider", provider}, more...)
	}

	t.Run("remaining figure", func(t *testing.T) {
		p := "figures-" + a.tenant
		first := r.mustSend(t, a, chat, a.tenant+"-fig1", on(p, "x-fakellm-ratelimit-remaining-tokens", "20")...)
		e2eWantStatus(t, first, http.StatusOK)
		// The cluster and account attributes arrived: the limit scoped by
		// them, the tightest on requests, applied.
		if got := e2eIntHeader(t, first, "x-ratelimit-limit-requests"); got != e2eProviderClusterRequests {
			t.Errorf("x-ratelimit-limit-requests: got %d, want %d (e2e-provider-cluster: Envoy sent xds.cluster_name and the route's account)", got, e2eProviderClusterRequests)
		}
		if got := first.header.Get("x-ratelimit-remaining-tokens"); got == "20" {
			t.Error("the provider's x-ratelimit-remaining-tokens reached the client")
		}
		second := r.mustSend(t, b, chat, b.tenant+"-fig2", on(p)...)
		e2eWantStatus(t, second, http.StatusTooManyRequests)
		if got := second.header.Get("x-tokenwarden-limit"); got != "e2e-provider-tokens" {
			t.Errorf("x-tokenwarden-limit: got %q, want e2e-provider-tokens", got)
		}
	})

	// The case of a provider limit scoped by the account alone: an
	// o1-pro reply saying nothing is left emptied the counter every
	// model shared. Scoped by model too, it empties o1-pro's only.
	t.Run("a figure corrects its own model", func(t *testing.T) {
		p := "models-" + a.tenant
		o1pro := []byte(`{"model":"o1-pro","max_completion_tokens":50,"messages":[{"role":"user","content":"Hello there."}]}`)
		first := r.mustSend(t, a, o1pro, a.tenant+"-o1pro", on(p, "x-fakellm-ratelimit-remaining-tokens", "0")...)
		e2eWantStatus(t, first, http.StatusOK)
		e2eWantStatus(t, r.mustSend(t, b, chat, b.tenant+"-mini", on(p)...), http.StatusOK)
		again := r.mustSend(t, b, o1pro, b.tenant+"-o1pro", on(p)...)
		e2eWantStatus(t, again, http.StatusTooManyRequests)
		if got := again.header.Get("x-tokenwarden-limit"); got != "e2e-provider-tokens" {
			t.Errorf("x-tokenwarden-limit: got %q, want e2e-provider-tokens", got)
		}
	})

	// A provider 429 that states nothing left blocked the account for
	// every tenant for the rest of the limit's window, whatever the
	// provider's retry-after said. It blocks for no longer than that.
	t.Run("429 blocks the account for its retry-after", func(t *testing.T) {
		p := "blocked-" + a.tenant
		refused := r.mustSend(t, a, chat, a.tenant+"-429", on(p, "x-fakellm-status", "429", "x-fakellm-retry-after", "10")...)
		e2eWantStatus(t, refused, http.StatusTooManyRequests)
		met := time.Now()
		if got := refused.header.Get("x-tokenwarden-limit"); got != "" {
			t.Errorf("the provider's 429 names limit %q, want none", got)
		}
		if got := refused.header.Get("retry-after"); got != "10" {
			t.Errorf("the provider's retry-after: got %q, want 10", got)
		}
		for i, c := range []e2eCaller{a, b} {
			resp := r.mustSend(t, c, chat, fmt.Sprintf("%s-after429-%d", c.tenant, i), on(p)...)
			e2eWantStatus(t, resp, http.StatusTooManyRequests)
			if got := resp.header.Get("x-tokenwarden-limit"); got != "e2e-provider-tokens" {
				t.Errorf("caller %d after the provider's 429: x-tokenwarden-limit %q, want e2e-provider-tokens", i, got)
			}
			if got := e2eIntHeader(t, resp, "retry-after"); got > 10 {
				t.Errorf("caller %d after the provider's 429: retry-after %d, want at most the provider's 10", i, got)
			}
		}
		e2eWantStatus(t, r.mustSend(t, b, chat, b.tenant+"-other", on("other-"+a.tenant)...), http.StatusOK)
		// Once the provider's wait is over, the account serves everyone.
		time.Sleep(time.Until(met.Add(10 * time.Second)))
		e2eWantStatus(t, r.mustSend(t, b, chat, b.tenant+"-after-wait", on(p)...), http.StatusOK)
	})
}
