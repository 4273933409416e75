package extproc

import "testing"

// TestExplainLearned: the explanation shows the estimate on the cap and
// the learned one beside it, and Estimate is what the server reserves.
func TestExplainLearned(t *testing.T) {
	const body = `{"model":"gpt-4o-mini-2024-07-18","max_tokens":500,"n":2,"messages":[{"role":"user","content":"hi"}]}`
	s := lifecycleServer(t)
	e, err := s.Explain("/v1/chat/completions", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if e.Learned != nil {
		t.Errorf("learning off: got %+v, want no learned explanation", e.Learned)
	}
	capEstimate := e.Estimate

	l, err := newLearner(LearnedOutput{Enabled: true, MinSamples: 2, Floor: 16}, newLearnedMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	s.learned = l
	k, _ := l.key("openai.chat", "gpt-4o-mini", nil)
	for i, want := range []struct {
		samples, learned, reserved int64
	}{
		{0, 0, 1000}, // nothing learned: the cap, 500 × 2 choices
		{1, 0, 1000}, // below min_samples
		{2, 20, 40},  // 20 per choice
	} {
		e, err := s.Explain("/v1/chat/completions", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		le := e.Learned
		switch {
		case le == nil:
			t.Fatalf("step %d: no learned explanation", i)
		case le.Samples != want.samples || le.OutputTokens != want.learned || le.MinSamples != 2 || le.Quantile != DefaultLearnedQuantile:
			t.Errorf("step %d: got %+v, want %d samples, %d learned", i, le, want.samples, want.learned)
		case le.CapEstimate != capEstimate:
			t.Errorf("step %d: cap estimate %+v, want %+v", i, le.CapEstimate, capEstimate)
		case e.Estimate.OutputTokens != want.reserved || e.Estimate.InputTokens != capEstimate.InputTokens:
			t.Errorf("step %d: reserves %+v, want the input and %d output", i, e.Estimate, want.reserved)
		}
		l.est.Observe(k, 20)
	}
	// Explaining counts nothing.
	if n := l.est.Len(); n != 1 {
		t.Errorf("keys: got %d, want 1", n)
	}
	e, err = s.Explain("/v1/embeddings", []byte(`{"model":"text-embedding-3-small","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	if e.Learned != nil {
		t.Errorf("embeddings: got %+v, want no learned explanation (no output)", e.Learned)
	}
}
