package envoy

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestE2EImplausibleUsage: through the real Envoy, fakellm reports
// "prompt_tokens": 1e30 and "completion_tokens": 1e30 (the demo's
// x-fakellm-input-tokens and x-fakellm-output-tokens) for a gpt-4o-mini
// call capped at 64 tokens, as JSON and as a stream. tokenwarden charges
// the bound — the model's context window (128,000 in the rig's config)
// and the cap — logs the report, and the tenant, whose limit is
// 2,000,000 tokens, keeps calling: the report clamped to 2^53 used to
// lock it out for the limit's whole window.
func TestE2EImplausibleUsage(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t)
	absurd := []string{"x-fakellm-input-tokens", "1e30", "x-fakellm-output-tokens", "1e30"}
	const want = 128000 + 64
	for _, stream := range []bool{false, true} {
		tag := fmt.Sprintf("%s-stream-%v", c.tenant, stream)
		e2eWantStatus(t, r.mustSend(t, c, e2eChat(t, "Say hi.", 64, stream), tag, absurd...), http.StatusOK)
		rec := r.awaitSettled(t, accessLogLine(t, r.envoy.stdout, tag), 5*time.Second)
		if rec["basis"] != "usage" {
			t.Errorf("stream %v: settled on %v, want usage", stream, rec["basis"])
		}
		if got, ok := rec["actual_tokens"].(float64); !ok || int64(got) != want {
			t.Errorf("stream %v: charged %v tokens, want %d (the context window and the cap)", stream, rec["actual_tokens"], want)
		}
		logged := false
		for _, w := range r.tokenwarden().logLines("usage report beyond what the request could produce; charged at the bound") {
			logged = logged || w["reservation"] == rec["reservation"]
		}
		if !logged {
			t.Errorf("stream %v: no warning names reservation %v", stream, rec["reservation"])
		}
	}
	e2eWantStatus(t, r.mustSend(t, c, e2eChat(t, "Say hi again.", 64, false), ""), http.StatusOK)
}
