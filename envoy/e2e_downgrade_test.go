package envoy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fallbackCluster is the rig's cluster of its second fakellm, the
// upstream of envoy.yaml's x-tokenwarden-model route.
const fallbackCluster = "fakellm-fallback"

// e2eFallbackRoute points envoy.yaml's route for a downgraded request
// (the one that matches x-tokenwarden-model) at a second upstream, addr,
// so that a test sees which upstream served a request. The shipped
// route must be there.
func e2eFallbackRoute(t *testing.T, addr string) func(doc map[string]any) {
	return func(doc map[string]any) {
		hcm := path(t, doc, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config")
		vh := named(t, path(t, hcm, "route_config", "virtual_hosts"), "llm")
		found := false
		for _, r := range vh["routes"].([]any) {
			rt := r.(map[string]any)
			hs, _ := path(t, rt, "match").(map[string]any)["headers"].([]any)
			for _, h := range hs {
				if h.(map[string]any)["name"] == "x-tokenwarden-model" {
					path(t, rt, "route").(map[string]any)["cluster"] = fallbackCluster
					found = true
				}
			}
		}
		if !found {
			t.Fatal("envoy.yaml has no route that matches x-tokenwarden-model")
		}
		res := path(t, doc, "static_resources").(map[string]any)
		res["clusters"] = append(res["clusters"].([]any), map[string]any{
			"name": fallbackCluster, "type": "STATIC", "connect_timeout": "1s",
			"load_assignment": map[string]any{
				"cluster_name": fallbackCluster,
				"endpoints": []any{map[string]any{"lb_endpoints": []any{map[string]any{
					"endpoint": map[string]any{"address": map[string]any{"socket_address": socketAddress(t, addr)}},
				}}}},
			},
		})
	}
}

// TestE2EDowngrade: through the real Envoy 1.40, a "degrade" caller's
// first gpt-4o request goes to gpt-4o on the rig's first fakellm; once
// e2e-degrade-4o is spent, the next is rewritten to gpt-4o-mini by
// tokenwarden in its reply to the BUFFERED body, and Envoy, told to clear
// its route cache, routes it on x-tokenwarden-model to the second
// fakellm. It streams, tells the client it was downgraded, and settles
// on gpt-4o-mini's counters.
func TestE2EDowngrade(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t, "degrade")
	chat := func(stream bool) []byte {
		b, err := json.Marshal(map[string]any{"model": "gpt-4o", "max_tokens": 100, "stream": stream,
			"messages": []any{map[string]any{"role": "user", "content": "What is a PDU session?"}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	tag := c.tenant + "-first"
	resp := r.mustSend(t, c, chat(false), tag, e2eFixedUsage...)
	e2eWantStatus(t, resp, http.StatusOK)
	line := accessLogLine(t, r.envoy.stdout, tag)
	if got := resp.header.Get("x-fakellm-seen-model"); got != "gpt-4o" || line["upstream"] != r.llmAddr {
		t.Errorf("first request: answered as %q by %v, want gpt-4o by the first fakellm %s", got, line["upstream"], r.llmAddr)
	}
	if v := resp.header.Values("x-tokenwarden-downgraded"); len(v) != 0 {
		t.Errorf("x-tokenwarden-downgraded on an admitted request: %q", v)
	}

	tag = c.tenant + "-down"
	resp = r.mustSend(t, c, chat(true), tag, e2eFixedUsage...)
	e2eWantStatus(t, resp, http.StatusOK)
	line = accessLogLine(t, r.envoy.stdout, tag)
	if got := resp.header.Get("x-fakellm-seen-model"); got != "gpt-4o-mini" {
		t.Errorf("downgraded request answered as %q, want gpt-4o-mini", got)
	}
	if line["upstream"] != r.llm2Addr {
		t.Errorf("downgraded request went to %v, want the fallback's upstream %s (the first is %s)", line["upstream"], r.llm2Addr, r.llmAddr)
	}
	if got := resp.header.Get("x-tokenwarden-downgraded"); got != "gpt-4o->gpt-4o-mini" {
		t.Errorf("x-tokenwarden-downgraded: got %q, want gpt-4o->gpt-4o-mini", got)
	}
	if !strings.Contains(string(resp.body), "data: [DONE]") {
		t.Errorf("the stream did not reach the client whole:\n%s", resp.body)
	}
	for k, want := range map[string]any{"tw_model": "gpt-4o-mini", "tw_downgraded_from": "gpt-4o"} {
		if line[k] != want {
			t.Errorf("access log %s: got %v, want %v", k, line[k], want)
		}
	}
	rec := r.awaitSettled(t, line, 5*time.Second)
	if rec["basis"] != "usage" || rec["actual_tokens"] != float64(e2eInput+e2eOutput) {
		t.Errorf("settlement: got %v, want the stream's usage, %d tokens", rec, e2eInput+e2eOutput)
	}
	// Each model's counter holds its own request's usage.
	for model, want := range map[string]int64{"gpt-4o": e2eInput + e2eOutput, "gpt-4o-mini": e2eInput + e2eOutput} {
		if got := r.counterUsed(t, "e2e-degrade-tokens", "tenant", c.tenant, "model", model); got != want {
			t.Errorf("e2e-degrade-tokens on %s: got %d used, want %d", model, got, want)
		}
	}
}

// counterUsed asks tokenwarden's usage API what one counter of a limit
// holds, the counter named by its scope values (name, value, …).
func (r *e2eRig) counterUsed(t *testing.T, limit string, scope ...string) int64 {
	t.Helper()
	var q []string
	for i := 0; i+1 < len(scope); i += 2 {
		q = append(q, scope[i]+"="+scope[i+1])
	}
	code, body, err := e2eGet(fmt.Sprintf("http://%s/v1/limits/%s/usage?%s", r.tokenwarden().admin, limit, strings.Join(q, "&")))
	if err != nil || code != http.StatusOK {
		t.Fatalf("usage API: %d %v %s", code, err, body)
	}
	var u struct {
		Used int64 `json:"used"`
	}
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		t.Fatal(err)
	}
	return u.Used
}

// TestE2EDowngradeGeminiPath: Gemini names the model in the path, so the
// downgrade is a :path mutation in the reply to the BUFFERED body, which
// Envoy applies before the router: the upstream serves the fallback
// model from the rewritten path, the query kept.
func TestE2EDowngradeGeminiPath(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t, "degrade")
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"What is a PDU session?"}]}],"generationConfig":{"maxOutputTokens":100}}`)
	call := e2eCall{path: "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", tokenHeader: "x-goog-api-key", headers: e2eFixedUsage}
	for i, want := range []string{"gemini-2.5-pro", "gemini-2.5-flash"} {
		tag := fmt.Sprintf("%s-%d", c.tenant, i)
		resp := r.mustDo(t, c, body, tag, call)
		e2eWantStatus(t, resp, http.StatusOK)
		if got := resp.header.Get("x-fakellm-seen-model"); got != want {
			t.Errorf("request %d: answered as %q, want %s", i, got, want)
		}
		line := accessLogLine(t, r.envoy.stdout, tag)
		if p, _ := line["path"].(string); !strings.HasPrefix(p, "/v1beta/models/"+want+":streamGenerateContent?alt=sse&") {
			t.Errorf("request %d: the upstream's path was %q, want %s's", i, p, want)
		}
		if line["tw_model"] != want || line["tw_settled_on"] != "usage" {
			t.Errorf("request %d: access log model %v settled on %v, want %s on usage", i, line["tw_model"], line["tw_settled_on"], want)
		}
	}
}
