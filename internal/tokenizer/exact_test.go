package tokenizer

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestExactCutsKeepTokenisation checks that counting a text in pieces cut
// at cuts() gives the tokenizer's count for the whole text, on every
// accuracy sample, for both encodings.
func TestExactCutsKeepTokenisation(t *testing.T) {
	ps := testProfiles(t)
	cs := corpora(t)
	for _, enc := range []string{O200kBase, Cl100kBase} {
		counts := exactCounts(t, cs, enc)
		for ci, c := range cs {
			for i, s := range c.samples {
				if raceEnabled && i%4 != 0 {
					continue
				}
				want := counts[ci][i]
				got, ok := exactCount(enc, s, ps[profileO200k])
				if !ok {
					t.Fatalf("%s: encoding not loaded", enc)
				}
				if longestSegment(s) <= maxExactSegment {
					if got != want {
						t.Errorf("%s, %s sample %d: counted in pieces %d, whole %d", enc, c.name, i, got, want)
					}
				} else if float64(got) < 0.9*float64(want) {
					t.Errorf("%s, %s sample %d: partly approximated %d, exact %d", enc, c.name, i, got, want)
				}
			}
		}
	}
}

func longestSegment(s string) int {
	longest, last := 0, 0
	for _, c := range cuts(s) {
		longest = max(longest, c-last)
		last = c
	}
	return longest
}

func TestCuts(t *testing.T) {
	tests := []struct {
		name, text string
		want       []int
	}{
		{"empty", "", []int{0}},
		{"words", "ab cd", []int{2, 5}},
		{"contraction stays whole", "don't", []int{5}},
		{"digits then letters", "ab12cd", []int{2, 4, 6}},
		{"punctuation", "a.b", []int{1, 3}},
		{"no cut after space or punctuation", "  ..x", []int{5}},
		{"combining mark stays with its letter", "e\u0301x", []int{4}},
		{"CJK before its punctuation", "中文，好", []int{6, 12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cuts(tt.text); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("cuts(%q) = %v, want %v", tt.text, got, tt.want)
			}
		})
	}
}

// TestExactBoundedTime feeds texts that would make tiktoken-go quadratic
// (one pre-split word of 200 KB); their long stretches are approximated.
func TestExactBoundedTime(t *testing.T) {
	c, err := New(Config{Mode: ModeExact, ExactMaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	c.CountTokens("gpt-4o", "load") // the encoding load is not what is timed
	for _, text := range []string{strings.Repeat("a", 200<<10), strings.Repeat(" ", 200<<10), strings.Repeat("!", 200<<10), strings.Repeat("漢", 70<<10)} {
		start := time.Now()
		n := c.CountTokens("gpt-4o", text)
		if d := time.Since(start); d > 2*time.Second || n <= 0 {
			t.Errorf("CountTokens(%.10q… %d bytes) = %d in %v, want > 0 within 2s", text, len(text), n, d)
		}
	}
}

func TestCountTokensModes(t *testing.T) {
	text := "Exact counting is for models whose tokenizer is public."
	e, err := encoding(O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	exact := int64(len(e.EncodeOrdinary(text)))
	approx, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		cfg   Config
		model string
		want  int64
	}{
		{"exact for gpt-4o", Config{Mode: ModeExact}, "gpt-4o", exact},
		{"exact for gpt-5 via our table", Config{Mode: ModeExact}, "gpt-5-mini", exact},
		{"exact by rule", Config{PerModel: []Rule{{Pattern: "gpt-*", Mode: ModeExact}}}, "gpt-4.1", exact},
		{"no public tokenizer: approximated", Config{Mode: ModeExact}, "claude-sonnet-4-5", approx.CountTokens("claude-sonnet-4-5", text)},
		{"too long: approximated", Config{Mode: ModeExact, ExactMaxBytes: 10}, "gpt-4o", approx.CountTokens("gpt-4o", text)},
		{"approximate by rule", Config{Mode: ModeExact, PerModel: []Rule{{Pattern: "*4o*", Mode: ModeApproximate}}}, "openai/gpt-4o", approx.CountTokens("gpt-4o", text)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.CountTokens(tt.model, text); got != tt.want {
				t.Errorf("CountTokens(%q) = %d, want %d", tt.model, got, tt.want)
			}
		})
	}
}

// TestConcurrentCounting runs exact and approximate counting from many
// goroutines at once (run with -race): the lazily loaded encodings and
// tables are shared.
func TestConcurrentCounting(t *testing.T) {
	c, err := New(Config{Mode: ModeExact})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"one two three", "中文和日本語", "func main() {}\n", "😀 hi"}
	models := []string{"gpt-4o", "gpt-4", "claude-3-haiku", "o3"}
	want := map[string]int64{}
	for _, m := range models {
		for _, s := range texts {
			want[m+s] = c.CountTokens(m, s)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				m, s := models[(g+i)%len(models)], texts[i%len(texts)]
				if got := c.CountTokens(m, s); got != want[m+s] {
					t.Errorf("CountTokens(%q, %q) = %d concurrently, %d alone", m, s, got, want[m+s])
				}
			}
		})
	}
	wg.Wait()
}
