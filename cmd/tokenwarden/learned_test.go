package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
)

// TestEstimateLearned: with learned output estimates on, estimate shows
// the learned figure beside the cap's; its own server has learned
// nothing, and says so.
func TestEstimateLearned(t *testing.T) {
	cfg := writeFile(t, t.TempDir(), "tw.yaml", "estimation: {learned_output: {enabled: true, min_samples: 30}}\n")
	var out bytes.Buffer
	body := `{"model":"gpt-4o","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`
	if err := runEstimate(context.Background(), []string{"-config", cfg}, strings.NewReader(body), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	want := "learned output: none yet (0 of 30 completions of gpt-4o on openai.chat): the cap is reserved"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}

	// A server that has learned: both figures.
	out.Reset()
	e := &extproc.Explanation{API: "openai.chat", Model: "gpt-4o", Estimate: accounting.Estimate{InputTokens: 9, OutputTokens: 240},
		Learned: &extproc.LearnedExplanation{Quantile: 0.95, MinSamples: 30, Samples: 60, OutputTokens: 120,
			CapEstimate: accounting.Estimate{InputTokens: 9, OutputTokens: 2000}}}
	printLearned(&out, e, e.Learned)
	want = "learned output: p95 of 60 completions = 120 per choice; reserving 240 output tokens instead of the cap's 2000"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

func TestPrintConfigLearned(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{
		{"off", "listen: 127.0.0.1:1\n", "learned output estimates: off (every request reserves its whole output cap)"},
		{"defaults", "estimation: {learned_output: {enabled: true}}\n",
			"learned output estimates: on: reserve p95 of the last ~1000 completions per model+api once 50 are seen, at least 256 tokens per choice, at most 4096 estimates per replica; " +
				"the cap is still sent and a longer completion charged in full, so a window can be overspent by up to (requests in flight) × (cap − learned)"},
		{"settings", "identity: {attributes: {tenant: {header: x-tenant}}}\nestimation: {learned_output: {enabled: true, quantile: 0.9, min_samples: 2000, floor: 32, max_keys: 10, scope: [tenant]}}\n",
			"learned output estimates: on: reserve p90 of the last ~2000 completions per model+api+tenant once 2000 are seen, at least 32 tokens per choice, at most 10 estimates per replica"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := printed(t, tt.config)
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out.String())
			}
		})
	}
}
