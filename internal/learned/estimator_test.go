package learned

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var testOptions = Options{Quantile: 0.95, MinSamples: 3, DecaySamples: 100, Floor: 16, MaxKeys: 2}

func newEstimator(t testing.TB, o Options) *Estimator {
	t.Helper()
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(o *Options)
		want   string // part of the error; "" for none
	}{
		{"valid", func(*Options) {}, ""},
		{"quantile 0", func(o *Options) { o.Quantile = 0 }, "quantile 0 is not in (0, 1)"},
		{"quantile 1", func(o *Options) { o.Quantile = 1 }, "quantile 1 is not in (0, 1)"},
		{"quantile NaN", func(o *Options) { o.Quantile = math.NaN() }, "quantile NaN"},
		{"no min samples", func(o *Options) { o.MinSamples = 0 }, "min_samples 0 is below 1"},
		{"memory below min samples", func(o *Options) { o.DecaySamples = 2 }, "decay_samples 2 is below min_samples"},
		{"memory too long", func(o *Options) { o.DecaySamples = MaxDecaySamples + 1 }, "decay_samples 1000001 is above 1000000"},
		{"no floor", func(o *Options) { o.Floor = 0 }, "floor 0 is outside"},
		{"floor too large", func(o *Options) { o.Floor = MaxSample + 1 }, "floor 2147483648 is outside"},
		{"no keys", func(o *Options) { o.MaxKeys = 0 }, "max_keys 0 is below 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions
			tt.change(&o)
			err := o.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestEstimate: nothing until MinSamples, then the quantile, never below
// the floor.
func TestEstimate(t *testing.T) {
	e := newEstimator(t, testOptions)
	k := Key{API: "openai.chat", Model: "gpt-4o-mini"}
	steps := []struct {
		observe int64 // -1: none
		tokens  int64
		samples int64
		ok      bool
	}{
		{-1, 0, 0, false},
		{300, 0, 1, false},
		{300, 0, 2, false},
		{300, 300, 3, true}, // 300's bucket reaches 302
		{2, 300, 4, true},
	}
	for i, s := range steps {
		if s.observe >= 0 {
			e.Observe(k, s.observe)
		}
		tokens, samples, ok := e.Estimate(k)
		if ok != s.ok || samples != s.samples || (ok && (tokens < s.tokens || tokens > s.tokens*109/100)) {
			t.Errorf("step %d: got %d from %d samples (ok %v), want about %d from %d (ok %v)", i, tokens, samples, ok, s.tokens, s.samples, s.ok)
		}
	}
	short := Key{API: "openai.chat", Model: "tiny"}
	for range 10 {
		e.Observe(short, 1)
	}
	if tokens, _, ok := e.Estimate(short); !ok || tokens != testOptions.Floor {
		t.Errorf("estimate of 1-token completions: got %d (ok %v), want the floor %d", tokens, ok, testOptions.Floor)
	}
}

// TestEvictsLeastRecentlyUsed: at MaxKeys, a new key takes the place of
// the one used longest ago, estimates counting as use.
func TestEvictsLeastRecentlyUsed(t *testing.T) {
	e := newEstimator(t, testOptions)
	a, b, c := Key{Model: "a"}, Key{Model: "b"}, Key{Model: "c"}
	e.Observe(a, 100)
	e.Observe(b, 100)
	e.Estimate(a) // b is now the least recently used
	e.Observe(c, 100)
	if n := e.Len(); n != 2 {
		t.Errorf("keys held: got %d, want 2", n)
	}
	if _, samples, _ := e.Estimate(b); samples != 0 {
		t.Errorf("b: got %d samples, want it evicted", samples)
	}
	if _, samples, _ := e.Estimate(a); samples != 1 {
		t.Errorf("a: got %d samples, want 1 (kept)", samples)
	}
	// The evicted key starts afresh.
	e.Observe(b, 100)
	if _, samples, _ := e.Estimate(b); samples != 1 {
		t.Errorf("b again: got %d samples, want 1", samples)
	}
	// An estimate of an unknown key creates nothing.
	e.Estimate(Key{Model: "d"})
	if n := e.Len(); n != 2 {
		t.Errorf("keys held after estimating an unknown key: got %d, want 2", n)
	}
}

// TestScopeKeepsKeysApart: keys that differ only in their scope learn
// apart.
func TestScopeKeepsKeysApart(t *testing.T) {
	e := newEstimator(t, Options{Quantile: 0.5, MinSamples: 1, DecaySamples: 10, Floor: 1, MaxKeys: 10})
	e.Observe(Key{API: "x", Model: "m", Scope: "a"}, 10)
	e.Observe(Key{API: "x", Model: "m", Scope: "b"}, 1000)
	if got, _, _ := e.Estimate(Key{API: "x", Model: "m", Scope: "a"}); got != 10 {
		t.Errorf("scope a: got %d, want 10", got)
	}
	if _, _, ok := e.Estimate(Key{API: "x", Model: "m"}); ok {
		t.Errorf("the unscoped key has an estimate it was never fed")
	}
}

func TestLongKeyIsNotLearned(t *testing.T) {
	e := newEstimator(t, testOptions)
	e.Observe(Key{Model: strings.Repeat("m", MaxKeyBytes+1)}, 10)
	if n := e.Len(); n != 0 {
		t.Errorf("keys held: got %d, want 0", n)
	}
}

// TestNoAllocations: once a key is held, neither call allocates.
func TestNoAllocations(t *testing.T) {
	e := newEstimator(t, testOptions)
	k := Key{API: "openai.chat", Model: "gpt-4o-mini"}
	e.Observe(k, 100)
	if n := testing.AllocsPerRun(100, func() { e.Observe(k, 100); e.Estimate(k) }); n != 0 {
		t.Errorf("got %v allocations per Observe and Estimate, want 0", n)
	}
}

// TestConcurrent: Observe, Estimate and eviction from many goroutines
// (run with -race) keep the bounds: never more than MaxKeys, every
// estimate between the floor and the largest sample's bucket.
func TestConcurrent(t *testing.T) {
	o := Options{Quantile: 0.9, MinSamples: 5, DecaySamples: 50, Floor: 8, MaxKeys: 7}
	e := newEstimator(t, o)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := Key{API: "a", Model: strconv.Itoa((g + i) % 11)}
				e.Observe(k, int64(i%700))
				if tokens, _, ok := e.Estimate(k); ok && (tokens < o.Floor || tokens > upper(bucketOf(699))) {
					t.Errorf("estimate %d outside %d..%d", tokens, o.Floor, upper(bucketOf(699)))
					return
				}
				if n := e.Len(); n > o.MaxKeys {
					t.Errorf("%d keys held, want at most %d", n, o.MaxKeys)
					return
				}
			}
		})
	}
	wg.Wait()
	// The recency list holds exactly the keys of the map.
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for en := e.head.next; en != &e.head; en = en.next {
		if e.keys[en.key] != en {
			t.Errorf("list entry %v is not the map's", en.key)
		}
		n++
	}
	if n != len(e.keys) {
		t.Errorf("recency list holds %d entries, map %d", n, len(e.keys))
	}
}

// BenchmarkObserveEstimate is one request's cost: an estimate at
// admission and a sample at settlement, on a held key.
func BenchmarkObserveEstimate(b *testing.B) {
	e := newEstimator(b, Options{Quantile: 0.95, MinSamples: 1, DecaySamples: 1000, Floor: 16, MaxKeys: 16})
	k := Key{API: "openai.chat", Model: "gpt-4o-mini"}
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		e.Estimate(k)
		e.Observe(k, 100+i%400)
		i++
	}
}
