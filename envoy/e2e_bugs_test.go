package envoy

import (
	"net/http"
	"strings"
	"testing"
)

// Server bugs the end-to-end rig found. Both failed against tokenwarden until
// commit 55860d2 ("extproc: remove every provider x-ratelimit-* header; write
// the estimate into metadata at admission"); they keep them fixed.

// TestE2EProviderRateLimitHeadersNeverReachClient calls as a caller to whom
// only a tokens limit applies (the token has no sub, so the per-user requests
// limit does not), with fakellm sending OpenAI's own account-wide
// x-ratelimit-* headers. tokenwarden used to overwrite only the tokens trio
// and leave the provider's requests trio in place, so the client read
// x-ratelimit-remaining-requests: 9999 — the provider account's figure,
// which is not the caller's (README, "What a client sees") — next to
// tokenwarden's own tokens figures. The reply to the response headers must remove every
// x-ratelimit-{limit,remaining,reset}-{requests,tokens,cost} and set the
// caller's (Envoy applies removals before sets).
func TestE2EProviderRateLimitHeadersNeverReachClient(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t)
	c.token = mintDemoToken(t, map[string]any{"tenant": c.tenant}) // no sub: no user
	resp := r.mustSend(t, c, e2eChat(t, "hello", 100, false), "", "x-fakellm-ratelimit-headers", "true")
	e2eWantStatus(t, resp, http.StatusOK)
	if got := e2eIntHeader(t, resp, "x-ratelimit-limit-tokens"); got != e2eTenantTokens {
		t.Fatalf("x-ratelimit-limit-tokens: got %d, want tokenwarden's %d", got, e2eTenantTokens)
	}
	for _, h := range []string{"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"} {
		if v := resp.header.Values(h); len(v) != 0 {
			t.Errorf("%s: got %q from the provider, want none (no requests limit applies to this caller)", h, v)
		}
	}
}

// TestE2ECutRequestIsLogged hangs up on an admitted stream and reads the
// request's Envoy access log line. tokenwarden used to write its dynamic
// metadata only with the reply to the response's last message, so a request
// that never got there — a client that hangs up, an upstream that drops the
// stream — was logged with every tw_* field null: no reservation id to match
// tokenwarden's own "settled" log line, no estimate, api or model, for
// exactly the requests an operator looks into. README.md ("Dynamic
// metadata") has estimate_tokens, estimate_cost, reservation, api and model
// written at admission, and only the actual_* fields after settlement.
//
// This works because Envoy 1.40 merges a namespace's fields across replies
// (checked with a stub ext_proc server: fields from the request_body reply
// and from a later reply both reach the access log, and the first alone does
// for a cut request), so the settlement's actual_* fields still join the
// admission's when the response completes (TestE2EAdmitted).
func TestE2ECutRequestIsLogged(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t)
	tag := c.tenant + "-cut"
	resp, err := r.open(t, t.Context(), c, e2eChat(t, "Count slowly to ten.", 1000, true), tag,
		"x-fakellm-chunks", "10", "x-fakellm-chunk-delay", "150ms")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("status: got %d, want 200", resp.StatusCode)
	}
	buf := make([]byte, 1)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	resp.Body.Close() // hang up mid-stream

	line := accessLogLine(t, r.envoy.stdout, tag)
	if flags, _ := line["flags"].(string); !strings.Contains(flags, "DC") {
		t.Fatalf("access log flags: got %v, want DC (the client hung up)", line["flags"])
	}
	var missing []string
	for _, k := range []string{"tw_reservation", "tw_estimate_tokens", "tw_estimate_cost", "tw_api", "tw_model"} {
		if line[k] == nil {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Errorf("access log of a cut request: got null %v, want the admission's values (line %v)", missing, line)
	}
}
