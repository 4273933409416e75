package extproc_test

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
)

// TestAudioTokensChargedAtTheirRate sends an audio chat completion
// through the test Envoy: the settlement books the audio input and
// output at the model's audio rates, as OpenAI bills them.
func TestAudioTokensChargedAtTheirRate(t *testing.T) {
	limit := accounting.Limit{Name: "spend", Dimension: accounting.Cost, Scope: []string{"tenant"},
		Algorithm: accounting.FixedWindow, Limit: 100_000_000, Window: time.Hour}
	r := newRig(t, []accounting.Limit{limit}, func(_ *extproc.Options, a *accounting.Options) {
		a.Prices = accounting.Prices{
			"gpt-4o-audio-preview": {Input: 2.5, AudioInput: 40, Output: 10, AudioOutput: 80},
			"default":              {Input: 150, Output: 600},
		}
	})
	body := []byte(`{"model":"gpt-4o-audio-preview","max_tokens":1000,"modalities":["text","audio"],"messages":[{"role":"user","content":"hello"}]}`)
	usage := []byte(`{"object":"chat.completion","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":500,` +
		`"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":600},"completion_tokens_details":{"audio_tokens":400}}}`)
	resp := r.envoy.Do(t.Context(), chatRequest("a", body), jsonUpstream(200, usage))
	wantStatus(t, resp, 200)
	r.envoy.Wait()
	// 400×2.5 + 600×40 + 100×10 + 400×80 = 1000 + 24000 + 1000 + 32000.
	if got, want := r.used(t, "spend", tenantA), int64(58000); got != want {
		t.Errorf("cost booked: got %d µ$, want %d", got, want)
	}
}
