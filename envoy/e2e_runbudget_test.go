package envoy

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestE2ERunBudget: through the real Envoy, an agent run with a budget of
// three steps (e2e-run-steps) is refused its fourth for good: a 429 that
// tells the SDKs not to retry and says the run is over. One of its steps
// is a stream the client hangs up on, which counts as a step all the
// same; another run is not held by it.
func TestE2ERunBudget(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t)
	run := []string{"x-agent-run-id", "run-" + c.tenant}
	step := e2eChat(t, "Next step.", 20, false)

	e2eWantStatus(t, r.mustSend(t, c, step, c.tenant+"-step1", run...), http.StatusOK)

	// Step 2 streams, and the client hangs up after the first chunk.
	resp, err := r.open(t, t.Context(), c, e2eChat(t, "Count slowly to ten.", 200, true), c.tenant+"-step2",
		append([]string{"x-fakellm-chunks", "10", "x-fakellm-chunk-delay", "100ms"}, run...)...)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("step 2: status %d, want 200", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading step 2: %v", err)
		}
		if e2eContentChunk(line) {
			break
		}
	}
	resp.Body.Close()
	r.awaitSettled(t, accessLogLine(t, r.envoy.stdout, c.tenant+"-step2"), 5*time.Second)

	third := r.mustSend(t, c, step, c.tenant+"-step3", run...)
	e2eWantStatus(t, third, http.StatusOK)
	if got := e2eIntHeader(t, third, "x-ratelimit-remaining-requests"); got != 0 {
		t.Errorf("step 3: x-ratelimit-remaining-requests: got %d, want 0", got)
	}

	fourth := r.mustSend(t, c, step, c.tenant+"-step4", run...)
	e2eWantStatus(t, fourth, http.StatusTooManyRequests)
	for h, want := range map[string]string{"x-should-retry": "false", "x-tokenwarden-limit": "e2e-run-steps", "retry-after": ""} {
		if got := fourth.header.Get(h); got != want {
			t.Errorf("step 4: %s: got %q, want %q", h, got, want)
		}
	}
	if !strings.Contains(string(fourth.body), "the run is over") {
		t.Errorf("step 4: body %s, want it to say the run is over", fourth.body)
	}

	other := []string{"x-agent-run-id", "other-" + c.tenant}
	e2eWantStatus(t, r.mustSend(t, c, step, c.tenant+"-other", other...), http.StatusOK)
}
