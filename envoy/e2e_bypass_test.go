package envoy

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The bypasses of issue #9, each shown through the real Envoy on the shipped
// envoy.yaml, the tokenwarden binary and fakellm: a way a client could get an
// LLM call through without it being metered, or metered for less than the
// provider bills. Each test states the bypass it closes.

// e2eAnthropic is an Anthropic Messages body.
func e2eAnthropic(t *testing.T, content string, maxTokens int, stream bool) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"model":      "claude-haiku-4-5",
		"max_tokens": maxTokens,
		"messages":   []any{map[string]any{"role": "user", "content": content}},
		"stream":     stream,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestE2ERequestTrailers closes the trailer bypass. An HTTP/2 request that
// ends with a trailer makes Envoy 1.40 (BUFFERED request body, trailers
// SKIP) send the whole body in one request_body message with
// end_of_stream false, and nothing after it; Envoy still waits for the
// reply before forwarding. tokenwarden used to take such a message for a
// first chunk and let the request through unmetered: a trailer was all a
// client needed to walk around every limit. Now a request with a trailer is
// judged like the same request without one.
func TestE2ERequestTrailers(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	trailer := http.Header{"X-Client-Checksum": {"c0ffee"}}

	t.Run("never fits", func(t *testing.T) {
		t.Parallel()
		c := newE2ECaller(t, "tight")
		body := e2eChat(t, "hi", 5000, false) // 5000 > the tight tier's 3000
		plain := r.mustDo(t, c, body, c.tenant+"-plain", e2eCall{h2: true})
		e2eWantStatus(t, plain, http.StatusTooManyRequests)
		tag := c.tenant + "-trailer"
		got := r.mustDo(t, c, body, tag, e2eCall{h2: true, trailer: trailer})
		e2eWantStatus(t, got, http.StatusTooManyRequests)
		if string(got.body) != string(plain.body) {
			t.Errorf("429 body with a trailer:\n%s\nwant the same as without:\n%s", got.body, plain.body)
		}
		for _, h := range []string{"x-tokenwarden-limit", "x-should-retry", "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens"} {
			if g, w := got.header.Values(h), plain.header.Values(h); !slices.Equal(g, w) {
				t.Errorf("%s with a trailer: got %q, want %q as without", h, g, w)
			}
		}
		if line := accessLogLine(t, r.envoy.stdout, tag); line["upstream"] != nil {
			t.Errorf("access log upstream: got %v, want none (fakellm must not be called)", line["upstream"])
		}
	})

	t.Run("admitted and settled", func(t *testing.T) {
		t.Parallel()
		c := newE2ECaller(t)
		body := e2eChat(t, "What is a PDU session?", 100, false)
		tag := c.tenant + "-trailer"
		resp := r.mustDo(t, c, body, tag, e2eCall{h2: true, trailer: trailer, headers: e2eFixedUsage})
		e2eWantStatus(t, resp, http.StatusOK)
		line := accessLogLine(t, r.envoy.stdout, tag)
		est := e2eLogNumber(t, line, "tw_estimate_tokens")
		if got, want := e2eIntHeader(t, resp, "x-ratelimit-remaining-tokens"), e2eTenantTokens-est; got != want {
			t.Errorf("x-ratelimit-remaining-tokens: got %d, want %d (reserved)", got, want)
		}
		if line["tw_settled_on"] != "usage" || line["tw_actual_tokens"] != float64(e2eInput+e2eOutput) {
			t.Errorf("access log: settled on %v with %v tokens, want usage and %d", line["tw_settled_on"], line["tw_actual_tokens"], e2eInput+e2eOutput)
		}
		// The counter moved by the usage: the next request sees it.
		next := r.mustSend(t, c, body, "")
		e2eWantStatus(t, next, http.StatusOK)
		if got, want := e2eIntHeader(t, next, "x-ratelimit-remaining-tokens"), e2eTenantTokens-int64(e2eInput+e2eOutput)-est; got != want {
			t.Errorf("next request's remaining tokens: got %d, want %d (the first charged %d)", got, want, e2eInput+e2eOutput)
		}
		if got := e2eIntHeader(t, next, "x-ratelimit-remaining-requests"); got != e2eUserRequests-2 {
			t.Errorf("next request's remaining requests: got %d, want %d", got, e2eUserRequests-2)
		}
	})
}

// TestE2EDuplicateKeys closes the duplicate-key bypass. The providers read
// the last of duplicate keys (Python's json); tokenwarden read the first. So
// {"max_tokens":1,…,"max_tokens":64000} reserved a few tokens while the
// provider could generate 64000, a duplicate "model" priced a dear model as
// a cheap one, and two "max_tokens":null left the injected cap on the first
// key and the provider uncapped. A key that only differs in case
// ("MAX_TOKENS") is read as max_tokens by Go's encoding/json (OpenAI-
// compatible servers written in Go) and ignored by Python. tokenwarden now
// refuses all of them with a 400 in the API's own error shape that names the
// key; nothing is reserved and the upstream is never called.
func TestE2EDuplicateKeys(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	const msgs = `"messages":[{"role":"user","content":"hello"}]`
	cases := []struct {
		name, path, body, key string
		anthropic             bool
	}{
		{name: "anthropic max_tokens", path: "/v1/messages", anthropic: true, key: "max_tokens",
			body: `{"model":"claude-haiku-4-5","max_tokens":1,` + msgs + `,"max_tokens":64000}`},
		{name: "chat model", key: "model",
			body: `{"model":"gpt-4o-mini",` + msgs + `,"max_tokens":100,"model":"o1-pro"}`},
		{name: "chat two null caps", key: "max_tokens",
			body: `{"model":"gpt-4o-mini",` + msgs + `,"max_tokens":null,"max_tokens":null}`},
		{name: "chat case variant", key: "MAX_TOKENS",
			body: `{"model":"gpt-4o-mini",` + msgs + `,"MAX_TOKENS":64000}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !json.Valid([]byte(tc.body)) {
				t.Fatalf("test body is not JSON: %s", tc.body)
			}
			c := newE2ECaller(t)
			call := e2eCall{path: tc.path, headers: e2eFixedUsage}
			if tc.anthropic {
				call.tokenHeader = "x-api-key"
			}
			tag := c.tenant + "-dup"
			resp := r.mustDo(t, c, []byte(tc.body), tag, call)
			e2eWantStatus(t, resp, http.StatusBadRequest)
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(resp.body, &e); err != nil {
				t.Fatalf("body: %v\n%s", err, resp.body)
			}
			if e.Error.Type != "invalid_request_error" || (tc.anthropic && e.Type != "error") {
				t.Errorf("body %s: want the API's invalid_request_error shape", resp.body)
			}
			if !strings.Contains(e.Error.Message, `"`+tc.key+`"`) {
				t.Errorf("error message %q does not name the key %q", e.Error.Message, tc.key)
			}
			if line := accessLogLine(t, r.envoy.stdout, tag); line["upstream"] != nil {
				t.Errorf("access log upstream: got %v, want none (fakellm must not be called)", line["upstream"])
			}

			// Nothing was reserved: a following request sees only itself.
			okCall := e2eCall{path: tc.path, tokenHeader: call.tokenHeader}
			okBody := e2eChat(t, "hello", 100, false)
			if tc.anthropic {
				okBody = e2eAnthropic(t, "hello", 100, false)
			}
			nextTag := c.tenant + "-next"
			next := r.mustDo(t, c, okBody, nextTag, okCall)
			e2eWantStatus(t, next, http.StatusOK)
			est := e2eLogNumber(t, accessLogLine(t, r.envoy.stdout, nextTag), "tw_estimate_tokens")
			if got, want := e2eIntHeader(t, next, "x-ratelimit-remaining-tokens"), e2eTenantTokens-est; got != want {
				t.Errorf("next request's remaining tokens: got %d, want %d (the 400 reserved nothing)", got, want)
			}
			if got := e2eIntHeader(t, next, "x-ratelimit-remaining-requests"); got != e2eUserRequests-1 {
				t.Errorf("next request's remaining requests: got %d, want %d (the 400 counted no request)", got, e2eUserRequests-1)
			}
		})
	}
}

// TestE2EGeminiEscapedPath closes the escaped-path bypass. Envoy's
// normalize_path leaves %3A (a reserved character) encoded, so tokenwarden
// saw /v1beta/models/gemini-2.0-flash%3AgenerateContent as an unknown path
// and only counted a request, while Google's front end (and fakellm)
// unescapes it to :generateContent and bills the generation. The escaped
// spellings are now metered exactly as the plain one.
func TestE2EGeminiEscapedPath(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"What is a PDU session?"}]}],"generationConfig":{"maxOutputTokens":100}}`)
	var plainEst int64
	for i, p := range []string{
		"/v1beta/models/gemini-2.0-flash:generateContent", // the reference
		"/v1beta/models/gemini-2.0-flash%3AgenerateContent",
		"/v1beta/models/gemini-2.0-flash%3agenerateContent",
	} {
		c := newE2ECaller(t)
		tag := c.tenant
		resp := r.mustDo(t, c, body, tag, e2eCall{path: p, tokenHeader: "x-goog-api-key", headers: e2eFixedUsage})
		e2eWantStatus(t, resp, http.StatusOK)
		if got := resp.header.Get("x-fakellm-seen-model"); got != "gemini-2.0-flash" {
			t.Fatalf("%s: fakellm answered as model %q, want gemini-2.0-flash (the test needs the upstream to take this path)", p, got)
		}
		line := accessLogLine(t, r.envoy.stdout, tag)
		for k, want := range map[string]any{
			"tw_api":           "gemini.generate_content",
			"tw_model":         "gemini-2.0-flash",
			"tw_settled_on":    "usage",
			"tw_actual_tokens": float64(e2eInput + e2eOutput),
		} {
			if line[k] != want {
				t.Errorf("%s: access log %s: got %v, want %v", p, k, line[k], want)
			}
		}
		if line[`tw_estimate_tokens`] == nil {
			t.Fatalf("%s: not reserved (no tw_estimate_tokens): %v", p, line)
		}
		est := e2eLogNumber(t, line, "tw_estimate_tokens")
		if got, want := e2eIntHeader(t, resp, "x-ratelimit-remaining-tokens"), e2eTenantTokens-est; got != want {
			t.Errorf("%s: x-ratelimit-remaining-tokens: got %d, want %d", p, got, want)
		}
		if i == 0 {
			plainEst = est
		} else if est != plainEst {
			t.Errorf("%s: estimate %d, want %d as for the unescaped path", p, est, plainEst)
		}
	}
}

// TestE2EAnthropicRateLimitHeadersNeverReachClient closes a leak of the
// provider's account-wide figures: Anthropic sends its own
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-* family,
// which describes the whole provider account, not the caller, and would
// contradict tokenwarden's x-ratelimit-* next to it. (OpenAI's x-ratelimit-*
// family: TestE2EProviderRateLimitHeadersNeverReachClient.)
func TestE2EAnthropicRateLimitHeadersNeverReachClient(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			t.Parallel()
			c := newE2ECaller(t)
			resp := r.mustDo(t, c, e2eAnthropic(t, "hello", 100, stream), "", e2eCall{
				path: "/v1/messages", tokenHeader: "x-api-key",
				headers: append([]string{"x-fakellm-ratelimit-headers", "true"}, e2eFixedUsage...),
			})
			e2eWantStatus(t, resp, http.StatusOK)
			// tokenwarden sets the requests and tokens families from the
			// caller's limits, for Anthropic's SDK; the provider's
			// input-tokens and output-tokens ones must be gone.
			for name, vs := range resp.header {
				n := strings.ToLower(name)
				if strings.HasPrefix(n, "anthropic-ratelimit-") && !strings.HasPrefix(n, "anthropic-ratelimit-requests-") &&
					!strings.HasPrefix(n, "anthropic-ratelimit-tokens-") {
					t.Errorf("%s: %q reached the client, want none of the provider's figures", name, vs)
				}
			}
			if got := e2eIntHeader(t, resp, "anthropic-ratelimit-tokens-limit"); got != e2eTenantTokens {
				t.Errorf("anthropic-ratelimit-tokens-limit: got %d, want tokenwarden's %d", got, e2eTenantTokens)
			}
			if got := e2eIntHeader(t, resp, "anthropic-ratelimit-requests-remaining"); got != e2eUserRequests-1 {
				t.Errorf("anthropic-ratelimit-requests-remaining: got %d, want tokenwarden's %d", got, e2eUserRequests-1)
			}
			if got := e2eIntHeader(t, resp, "x-ratelimit-limit-tokens"); got != e2eTenantTokens {
				t.Errorf("x-ratelimit-limit-tokens: got %d, want tokenwarden's %d", got, e2eTenantTokens)
			}
			if got := e2eIntHeader(t, resp, "x-ratelimit-remaining-requests"); got != e2eUserRequests-1 {
				t.Errorf("x-ratelimit-remaining-requests: got %d, want tokenwarden's %d", got, e2eUserRequests-1)
			}
		})
	}
}

// TestE2EEnvoyOwnErrors closes the timeout bypass. When the upstream is
// slower than the route's timeout, Envoy 1.40 answers 504 itself, and this
// local reply reaches ext_proc as an ordinary response_headers message
// (:status 504, no x-envoy-upstream-service-time); an upstream that takes
// the whole request and then drops the connection gets Envoy's 503 the same
// way. tokenwarden took these for the upstream's own error and booked zero
// tokens. But the request had been forwarded in full: the provider may be
// generating, and billing, all the same. A client that can make its calls
// outlast the timeout (a long prompt, a high max_tokens) got them free. The
// reservation now stays charged in full. Envoy's 503 for an upstream it
// could not connect to is told apart by the response.code_details
// attribute the shipped filter config asks for: that request was never
// sent, and costs nothing.
func TestE2EEnvoyOwnErrors(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	cases := []struct {
		name    string
		headers []string
		status  int
		flag    string // %RESPONSE_FLAGS% of Envoy's reply
		basis   string
		charged bool // the whole estimate, else nothing
	}{
		// fakellm answers after 3 s; the route gives up after 1 s.
		{"route timeout", append([]string{"x-fakellm-chunk-delay", "3s"}, e2eRouteTimeout1s...),
			http.StatusGatewayTimeout, "UT", "reserved", true},
		// fakellm reads the request and hangs up without a word.
		{"upstream reset before headers", []string{"x-fakellm-reset-before-headers", "true"},
			http.StatusServiceUnavailable, "UC", "reserved", true},
		// Nothing listens: the request never left Envoy.
		{"connection refused", e2eRouteUnreachable, http.StatusServiceUnavailable, "UF", "refused", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newE2ECaller(t)
			body := e2eChat(t, "Write a long story.", 300, false)
			tag := c.tenant + "-envoy-error"
			resp := r.mustSend(t, c, body, tag, tc.headers...)
			e2eWantStatus(t, resp, tc.status)
			line := accessLogLine(t, r.envoy.stdout, tag)
			if flags, _ := line["flags"].(string); !strings.Contains(flags, tc.flag) {
				t.Fatalf("access log: flags %v (details %v), want %s: the reply this case is about", line["flags"], line["details"], tc.flag)
			}
			est := e2eLogNumber(t, line, "tw_estimate_tokens")
			charge := int64(0)
			if tc.charged {
				charge = est
			}
			if line["tw_settled_on"] != tc.basis || line["tw_actual_tokens"] != float64(charge) {
				t.Errorf("access log: settled on %v with %v tokens, want %s and %d", line["tw_settled_on"], line["tw_actual_tokens"], tc.basis, charge)
			}

			// The same request again: its remaining figure is L − charge − est.
			next := r.mustSend(t, c, body, "")
			e2eWantStatus(t, next, http.StatusOK)
			if got, want := e2eIntHeader(t, next, "x-ratelimit-remaining-tokens"), e2eTenantTokens-charge-est; got != want {
				t.Errorf("remaining tokens after Envoy's %d: got %d, want %d (a charge of %d; it charged %d)",
					tc.status, got, want, charge, e2eTenantTokens-est-got)
			}
			t.Logf("Envoy's %d (%v) as the client got it: %s", resp.status, line["details"], strconv.Quote(string(resp.body)))
		})
	}
}

// TestE2EAzureDeploymentModel closes the Azure model bypass. Azure OpenAI
// serves the model of the deployment the path names and ignores the body's
// "model", so a body claiming a cheap model (or none: Azure's SDKs send
// none) must not price, or escape the model-matched limits of, the
// deployment's model. tokenwarden meters the deployment's model, mapped in
// the config (azure.deployments) or, unmapped, the deployment's name. The
// call authenticates with Azure's api-key header, which the shipped
// jwt_authn reads.
func TestE2EAzureDeploymentModel(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	cases := []struct {
		name, deployment, body, wantModel string
	}{
		{"mapped, body claims a cheaper model", "e2e-prod-4o",
			`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello"}],"max_tokens":100}`, "gpt-4o"},
		{"mapped, no model in the body", "e2e-prod-4o",
			`{"messages":[{"role":"user","content":"hello"}],"max_tokens":100}`, "gpt-4o"},
		{"unmapped deployment", "e2e-unmapped",
			`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello"}],"max_tokens":100}`, "e2e-unmapped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newE2ECaller(t)
			tag := c.tenant + "-azure"
			resp := r.mustDo(t, c, []byte(tc.body), tag, e2eCall{
				path:        "/openai/deployments/" + tc.deployment + "/chat/completions?api-version=2024-10-21",
				tokenHeader: "api-key", headers: e2eFixedUsage,
			})
			e2eWantStatus(t, resp, http.StatusOK)
			if got := resp.header.Get("x-fakellm-seen-model"); got != tc.deployment {
				t.Fatalf("fakellm answered as %q, want the deployment %s (the test needs Azure's routing)", got, tc.deployment)
			}
			line := accessLogLine(t, r.envoy.stdout, tag)
			for k, want := range map[string]any{
				"tw_api":           "openai.chat",
				"tw_model":         tc.wantModel,
				"tw_settled_on":    "usage",
				"tw_actual_tokens": float64(e2eInput + e2eOutput),
			} {
				if line[k] != want {
					t.Errorf("access log %s: got %v, want %v", k, line[k], want)
				}
			}
			est := e2eLogNumber(t, line, "tw_estimate_tokens")
			if got, want := e2eIntHeader(t, resp, "x-ratelimit-remaining-tokens"), e2eTenantTokens-est; got != want {
				t.Errorf("x-ratelimit-remaining-tokens: got %d, want %d", got, want)
			}
		})
	}
}

// TestE2EBackgroundResponseKeepsCharge closes the background bypass. A
// Responses API request with "background": true is answered at once with
// status "queued" and usage null; the generation runs on and is billed
// later, out of tokenwarden's sight. Settled on what the reply showed, it
// cost nothing. The reservation now stays charged in full.
func TestE2EBackgroundResponseKeepsCharge(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t)
	body := []byte(`{"model":"gpt-4o-mini","input":"Write a long story.","max_output_tokens":500,"background":true}`)
	tag := c.tenant + "-background"
	resp := r.mustDo(t, c, body, tag, e2eCall{path: "/v1/responses"})
	e2eWantStatus(t, resp, http.StatusOK)
	var reply struct {
		Status string
		Usage  any
	}
	if err := json.Unmarshal(resp.body, &reply); err != nil || reply.Status != "queued" || reply.Usage != nil {
		t.Fatalf("reply %s (%v): want fakellm's queued response with usage null", resp.body, err)
	}
	line := accessLogLine(t, r.envoy.stdout, tag)
	est := e2eLogNumber(t, line, "tw_estimate_tokens")
	if line["tw_settled_on"] != "reserved" || line["tw_actual_tokens"] != float64(est) {
		t.Errorf("access log: settled on %v with %v tokens, want reserved and the whole estimate %d", line["tw_settled_on"], line["tw_actual_tokens"], est)
	}
	next := r.mustDo(t, c, body, "", e2eCall{path: "/v1/responses"})
	e2eWantStatus(t, next, http.StatusOK)
	if got, want := e2eIntHeader(t, next, "x-ratelimit-remaining-tokens"), e2eTenantTokens-2*est; got != want {
		t.Errorf("remaining tokens after a background response: got %d, want %d (it charged its estimate %d)", got, want, est)
	}
}

// TestE2EAbsurdUsage sends usage reports no real provider would: 1e30
// tokens, more tokens than fit an int32, a negative count. tokenwarden must
// neither wrap a huge count into a negative charge (a credit that would
// hand the tenant unlimited budget) nor credit a negative one: a huge report
// is charged at what the request could have produced (gpt-4o-mini's
// context window in the rig's config, 128,000 tokens, and the output
// reported, within the cap), not its whole budget; a report with a
// negative count is unreadable, and settles as a response without usage
// (the input estimate plus the output observed), never below the counts
// it reports.
func TestE2EAbsurdUsage(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	cases := []struct {
		name, input string
		bounded     bool // the input reported is beyond the model's window
	}{
		{"1e30", "1e30", true},
		{"beyond int32", "99999999999", true},
		{"negative", "-5", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newE2ECaller(t)
			body := e2eChat(t, "hello", 100, false)
			first := r.mustSend(t, c, body, "", "x-fakellm-input-tokens", tc.input, "x-fakellm-output-tokens", strconv.Itoa(e2eOutput))
			e2eWantStatus(t, first, http.StatusOK)
			r1 := e2eIntHeader(t, first, "x-ratelimit-remaining-tokens") // L − est
			next := r.mustSend(t, c, body, "")
			if tc.bounded {
				e2eWantStatus(t, next, http.StatusOK)
				if charged := r1 - e2eIntHeader(t, next, "x-ratelimit-remaining-tokens"); charged != 128000+e2eOutput {
					t.Errorf("a report of %s input tokens charged %d, want %d (the model's context window and the output)", tc.input, charged, 128000+e2eOutput)
				}
				return
			}
			e2eWantStatus(t, next, http.StatusOK)
			// remaining₂ = L − charge₁ − est, and est = L − r1.
			charged := r1 - e2eIntHeader(t, next, "x-ratelimit-remaining-tokens")
			if charged <= e2eOutput {
				t.Errorf("a report of %s input and %d output tokens charged %d, want the input estimate and the output observed, above %d (no credit)", tc.input, e2eOutput, charged, e2eOutput)
			}
		})
	}
}
