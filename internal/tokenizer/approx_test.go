package tokenizer

import (
	"strings"
	"testing"
)

// reference is the approximation written plainly, one pair at a time,
// for checking the unrolled, branch-free count.
func reference(p *profile, s string) uint64 {
	if s == "" {
		return 0
	}
	sum := uint64(weightOne)
	for i := 1; i < len(s); i++ {
		sum += uint64(p.pairs[uint16(s[i-1])|uint16(s[i])<<8])
		if c := s[i]; s[i-1] == c && isRunByte(c) && (i < 2 || s[i-2] != c) {
			sum += uint64(p.runStart)
		}
	}
	return sum
}

func testProfiles(t testing.TB) map[string]*profile {
	t.Helper()
	ps, err := profiles()
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestCountMatchesReference(t *testing.T) {
	ps := testProfiles(t)
	for _, text := range []string{
		"", "a", "ab", "        ", "\t\t\tx", "a  b   c    d", "\n\n\n\n  \n", "12345678901234567",
		strings.Repeat(" ", 17) + "x" + strings.Repeat("\t", 9),
		"中文テキスト😀👍🏽 and ASCII", "\xff\xfe\x80\x80 invalid", strings.Repeat("ab  ", 100),
		// Runs across the count's blocks of sixteen pairs and its
		// words of eight, starting at the first byte and at the last.
		strings.Repeat(" ", 16), strings.Repeat(" ", 17), strings.Repeat(" ", 33),
		"x" + strings.Repeat(" ", 15) + "y" + strings.Repeat(" ", 16),
		strings.Repeat("a", 15) + "  " + strings.Repeat("b", 14) + "\t\t\t",
		strings.Repeat("a", 16) + "\t\t" + strings.Repeat("b", 15),
		strings.Repeat("a", 8) + strings.Repeat("\x00", 9) + strings.Repeat("\n", 9) + "c",
		strings.Repeat("b", 40) + "  ",
	} {
		for name, p := range ps {
			if got, want := p.count(text), reference(p, text); got != want {
				t.Errorf("%s: count(%q) = %d, want %d", name, text, got, want)
			}
		}
	}
}

func TestApproximateShapes(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	count := func(s string) int64 { return c.CountTokens("gpt-4o", s) }
	tests := []struct {
		name     string
		text     string
		min, max int64
	}{
		{"empty", "", 0, 0},
		{"one letter", "a", 1, 1},
		{"a word", "hello", 1, 2},
		{"a sentence", "The quick brown fox jumps over the lazy dog.", 9, 13},
		{"indentation costs about one token", "\n" + strings.Repeat(" ", 64) + "x", 3, 5},
		{"a long number is a token per three digits", strings.Repeat("7", 300), 100, 101},
		{"CJK is about a token per character", strings.Repeat("漢字", 100), 120, 260},
		{"emoji are dense", strings.Repeat("👨‍👩‍👧‍👦", 10), 40, 160},
		{"invalid bytes are never free", strings.Repeat("\xff", 100), 100, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := count(tt.text); got < tt.min || got > tt.max {
				t.Errorf("CountTokens(%.40q) = %d, want %d..%d", tt.text, got, tt.min, tt.max)
			}
		})
	}
}

func TestCharsPerTokenScales(t *testing.T) {
	text := strings.Repeat("Limits are counted in tokens, not requests. ", 50)
	base, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	dense, err := New(Config{PerModel: []Rule{{Pattern: "claude-*", CharsPerToken: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	b, d := base.CountTokens("claude-sonnet-4-5", text), dense.CountTokens("claude-sonnet-4-5", text)
	if d < 2*b-1 || d > 2*b+1 {
		t.Errorf("CharsPerToken 2: got %d tokens, want about twice %d", d, b)
	}
	if got := dense.CountTokens("gpt-4o", text); got != base.CountTokens("gpt-4o", text) {
		t.Errorf("a rule for claude-* changed gpt-4o's count to %d", got)
	}
}

// TestWide checks the table the count adds up: each pair's weight, and
// runPair on exactly the pairs of two equal run bytes.
func TestWide(t *testing.T) {
	for name, p := range testProfiles(t) {
		for k, w := range p.pairs {
			b0, b1 := byte(k), byte(k>>8)
			want := uint32(w)
			if b0 == b1 && isRunByte(b0) {
				want += runPair
			}
			if got := p.wide[k]; got != want {
				t.Errorf("%s: wide[%q] = %#x, want %#x", name, []byte{b0, b1}, got, want)
			}
		}
	}
}
