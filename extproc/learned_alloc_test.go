package extproc

import "testing"

// TestLearnedLifecycleAllocs: learned output estimates (unscoped) cost a
// lifecycle no allocation once its model and API are learned: the
// estimate is looked up and fed in place.
func TestLearnedLifecycleAllocs(t *testing.T) {
	msgs := lifecycleMessages(t, "t1")
	plain, learning := lifecycleServer(t), lifecycleServer(t)
	l, err := newLearner(LearnedOutput{Enabled: true, MinSamples: 1}, newLearnedMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	learning.learned = l
	replay(t, learning, msgs) // the key is created, and learns
	k, _ := l.key("openai.chat", "gpt-4o-mini", nil)
	if _, samples, ok := l.est.Estimate(k); !ok || samples != 1 {
		t.Fatalf("after one lifecycle: %d samples, estimate %v; want one, and an estimate", samples, ok)
	}
	// The least of three measurements each: a pool emptied by a GC
	// mid-measurement adds an allocation to one average or the other.
	least := func(s processor) float64 {
		n := testing.AllocsPerRun(200, func() { replay(t, s, msgs) })
		for range 2 {
			n = min(n, testing.AllocsPerRun(200, func() { replay(t, s, msgs) }))
		}
		return n
	}
	// Under the race detector sync.Pool drops objects at random, so the
	// two servers' counts wander apart by more than a GC's one.
	base, with := least(plain), least(learning)
	if with > base+raceAllocSlack {
		t.Errorf("allocations per lifecycle: %.0f learning, %.0f without; want no more", with, base)
	}
}

// BenchmarkProcessLearned is BenchmarkProcess's lifecycle with learned
// output estimates on and learned, beside the same server without them.
func BenchmarkProcessLearned(b *testing.B) {
	msgs := lifecycleMessages(b, "t1")
	learning := lifecycleServer(b)
	l, err := newLearner(LearnedOutput{Enabled: true, MinSamples: 1}, newLearnedMetrics(nil))
	if err != nil {
		b.Fatal(err)
	}
	learning.learned = l
	for _, tc := range []struct {
		name string
		p    processor
	}{
		{"off", lifecycleServer(b)},
		{"learned", learning},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				replay(b, tc.p, msgs)
			}
		})
	}
}
