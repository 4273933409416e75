package envoy

import (
	"bufio"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestE2ELearnedOutput: through the real Envoy, with learned output
// reservations on for the callers that send x-e2e-learn (scope [learn],
// min_samples 5): after five 20-token completions a request reserves its
// input and the learned 20 instead of its cap of 1000, while the
// provider still gets the cap. A reply cut half-way, which reports no
// usage, is charged the whole cap, not the learned figure; a stream the
// client hangs up on is charged its input and the output it saw.
func TestE2ELearnedOutput(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t)
	learn := []string{"x-e2e-learn", c.tenant, "x-fakellm-output-tokens", "20"}
	body := e2eChat(t, "Say hi.", 1000, false)

	var capped int64
	for i := range 5 {
		tag := fmt.Sprintf("%s-warm%d", c.tenant, i)
		e2eWantStatus(t, r.mustSend(t, c, body, tag, learn...), http.StatusOK)
		capped = e2eLogNumber(t, accessLogLine(t, r.envoy.stdout, tag), "tw_estimate_tokens")
	}
	input := capped - 1000
	if input <= 0 || input > 100 {
		t.Fatalf("estimate while warming: got %d, want the input and the whole cap of 1000", capped)
	}

	tag := c.tenant + "-learned"
	resp := r.mustSend(t, c, body, tag, learn...)
	e2eWantStatus(t, resp, http.StatusOK)
	// 20 rounds up to its histogram bucket's bound, by at most 9%.
	if est := e2eLogNumber(t, accessLogLine(t, r.envoy.stdout, tag), "tw_estimate_tokens"); est < input+20 || est > input+22 {
		t.Errorf("estimate after five 20-token completions: got %d, want %d (input) + 20..22", est, input)
	}
	if got := resp.header.Get("x-fakellm-seen-max-tokens"); got != "1000" {
		t.Errorf("max_tokens the provider read: got %q, want the whole cap, 1000", got)
	}

	// A JSON reply cut half-way reports no usage: the whole cap is
	// charged, as without learning.
	tag = c.tenant + "-cut"
	if _, err := r.send(t, c, body, tag, append([]string{"x-fakellm-cut-after", "1"}, learn...)...); err != nil {
		t.Logf("the cut reply: %v", err)
	}
	rec := r.awaitSettled(t, accessLogLine(t, r.envoy.stdout, tag), 5*time.Second)
	if rec["basis"] != "reserved" {
		t.Errorf("cut reply settled on %v, want reserved", rec["basis"])
	}
	if got, ok := rec["actual_tokens"].(float64); !ok || int64(got) != capped {
		t.Errorf("cut reply charged %v, want %d (the input and the whole cap)", rec["actual_tokens"], capped)
	}

	// A stream the client hangs up on after one content chunk is charged
	// its input and the output seen.
	tag = c.tenant + "-hangup"
	stream, err := r.open(t, t.Context(), c, e2eChat(t, "Count slowly to ten.", 1000, true), tag,
		append([]string{"x-fakellm-chunks", "10", "x-fakellm-chunk-delay", "100ms"}, learn...)...)
	if err != nil {
		t.Fatal(err)
	}
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("stream: status %d, want 200", stream.StatusCode)
	}
	br := bufio.NewReader(stream.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if e2eContentChunk(line) {
			break
		}
	}
	stream.Body.Close()
	rec = r.awaitSettled(t, accessLogLine(t, r.envoy.stdout, tag), 5*time.Second)
	if rec["basis"] != "estimate" {
		t.Errorf("hung-up stream settled on %v, want estimate", rec["basis"])
	}
	if got, ok := rec["actual_tokens"].(float64); !ok || got <= 0 || int64(got) >= capped {
		t.Errorf("hung-up stream charged %v, want its input and the output seen, below %d", rec["actual_tokens"], capped)
	}
}
