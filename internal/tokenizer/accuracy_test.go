package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// maxUnder is the largest under-estimate the approximation may make on any
// sample of any class: 0.10 is 10 %.
const maxUnder = 0.10

// classResult is the approximation's error on one corpus.
type classResult struct {
	name                string
	samples, bytes      int
	exact               int64
	errs                []float64 // sorted; (approx − exact) / exact
	worstUnder, worstOv string    // the samples, for a failure message
}

func (r *classResult) median() float64 { return r.errs[len(r.errs)/2] }
func (r *classResult) min() float64    { return r.errs[0] }
func (r *classResult) max() float64    { return r.errs[len(r.errs)-1] }

// exactCounts returns the exact count of every corpus sample in enc,
// computed once per test binary: tokenising the corpora is most of the
// tests' time.
func exactCounts(t *testing.T, cs []corpus, enc string) [][]int64 {
	t.Helper()
	exactCache.Lock()
	defer exactCache.Unlock()
	if got, ok := exactCache.m[enc]; ok {
		return got
	}
	e, err := encoding(enc)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]int64, len(cs))
	for i, c := range cs {
		for _, s := range c.samples {
			out[i] = append(out[i], int64(len(e.EncodeOrdinary(s))))
		}
	}
	exactCache.m[enc] = out
	return out
}

var exactCache = struct {
	sync.Mutex
	m map[string][][]int64
}{m: map[string][][]int64{}}

// measure compares a profile's estimate with an encoding's exact count on
// every sample of every corpus.
func measure(t *testing.T, cs []corpus, p *profile, enc string) []classResult {
	t.Helper()
	return measureFunc(t, cs, func(s string) int64 { return p.tokens(s, 1) }, enc)
}

// measureFunc is measure for any estimator.
func measureFunc(t *testing.T, cs []corpus, estimate func(string) int64, enc string) []classResult {
	t.Helper()
	counts := exactCounts(t, cs, enc)
	var out []classResult
	for ci, c := range cs {
		r := classResult{name: c.name, samples: len(c.samples)}
		lo, hi := 1e9, -1e9
		for si, s := range c.samples {
			exact := counts[ci][si]
			got := estimate(s)
			d := float64(got-exact) / float64(exact)
			r.errs = append(r.errs, d)
			r.bytes += len(s)
			r.exact += exact
			if d < lo {
				lo, r.worstUnder = d, s
			}
			if d > hi {
				hi, r.worstOv = d, s
			}
		}
		slices.Sort(r.errs)
		out = append(out, r)
	}
	return out
}

// TestAccuracyTable measures the approximation against the exact o200k
// (and cl100k) counts and prints the table in the README:
//
//	go test ./internal/tokenizer -run TestAccuracyTable -v
func TestAccuracyTable(t *testing.T) {
	cs := corpora(t)
	ps, err := profiles()
	if err != nil {
		t.Fatal(err)
	}
	o := measure(t, cs, ps[profileO200k], O200kBase)
	var b strings.Builder
	b.WriteString("Approximation (o200k profile) vs exact o200k_base; error = (approx − exact) / exact per sample\n\n")
	b.WriteString("| class | samples | bytes | bytes/token | median | worst under | worst over |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range o {
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f | %+.1f%% | %+.1f%% | %+.1f%% |\n", r.name, r.samples, r.bytes,
			float64(r.bytes)/float64(r.exact), 100*r.median(), 100*r.min(), 100*r.max())
	}
	c := measure(t, cs, ps[profileCl100k], Cl100kBase)
	go1 := measure(t, cs, ps[profileGeneric], O200kBase)
	gc := measure(t, cs, ps[profileGeneric], Cl100kBase)
	old := measureFunc(t, cs, charsOver4, O200kBase)
	b.WriteString("\nOther profiles, and the chars/4 rule this replaces (median / worst under / worst over)\n\n")
	b.WriteString("| class | cl100k profile vs cl100k_base | generic vs o200k_base | generic vs cl100k_base | chars/4 vs o200k_base |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	cell := func(r classResult) string {
		return fmt.Sprintf("%+.0f%% / %+.0f%% / %+.0f%%", 100*r.median(), 100*r.min(), 100*r.max())
	}
	for i := range o {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", o[i].name, cell(c[i]), cell(go1[i]), cell(gc[i]), cell(old[i]))
	}
	t.Log("\n" + b.String())

	for _, set := range []struct {
		name string
		rs   []classResult
	}{{"o200k profile vs o200k_base", o}, {"cl100k profile vs cl100k_base", c}, {"generic vs o200k_base", go1}, {"generic vs cl100k_base", gc}} {
		for i, r := range set.rs {
			if r.min() < -maxUnder {
				t.Errorf("%s, %s: worst under-estimate %+.1f%%, want ≥ %+.0f%%; sample: %.200q", set.name, r.name, 100*r.min(), -100*maxUnder, r.worstUnder)
			}
			if mo := cs[i].maxOver; set.name == "o200k profile vs o200k_base" && mo > 0 && r.max() > mo {
				t.Errorf("%s, %s: worst over-estimate %+.1f%%, want ≤ %+.0f%%; sample: %.200q", set.name, r.name, 100*r.max(), 100*mo, r.worstOv)
			}
		}
	}
}

// charsOver4 is the flat rule the approximation replaced: four bytes a
// token, rounded up.
func charsOver4(s string) int64 { return int64(len(s)+3) / 4 }
