package tokenizer

import (
	"strings"
	"testing"
)

// FuzzApproximate checks the approximation on any bytes: it never panics,
// never goes negative, agrees with the plain reference loop, and never
// drops when text is appended (a longer prompt must not reserve less).
func FuzzApproximate(f *testing.F) {
	for _, s := range []string{"", "hello world", "  \t\t\n\n", "中文😀", "\xff\x80\xc3", "1234567890", "a  b\t\tc"} {
		f.Add(s, "x")
	}
	ps := testProfiles(f)
	f.Fuzz(func(t *testing.T, s, more string) {
		for name, p := range ps {
			got := p.count(s)
			if want := reference(p, s); got != want {
				t.Fatalf("%s: count(%q) = %d, reference %d", name, s, got, want)
			}
			if n := p.tokens(s, 1); n < 0 || s != "" && n < 1 {
				t.Fatalf("%s: tokens(%q) = %d", name, s, n)
			}
			if longer := p.count(s + more); longer < got {
				t.Fatalf("%s: count(%q) = %d < count(%q) = %d", name, s+more, longer, s, got)
			}
		}
	})
}

// FuzzCount holds the count to swarCount, the count it replaced, on any
// bytes and from every offset into them (the count reads sixteen pairs at
// a time, so where a run falls in a block matters). Its seeds are the
// accuracy corpora, every sample of them, and text made to cross the
// blocks' edges: CJK, emoji, invalid UTF-8, and long runs of each run
// byte, of newlines and of letters.
func FuzzCount(f *testing.F) {
	for _, c := range corpora(f) {
		for _, s := range c.samples {
			f.Add(s)
		}
	}
	for _, s := range []string{
		strings.Repeat("漢字かな한글", 40),
		strings.Repeat("👨‍👩‍👧‍👦🏳️‍🌈👍🏽", 20),
		strings.Repeat("\xff\xfe\x80\xc3(\xe2\x82", 30),
		strings.Repeat(" ", 100),
		strings.Repeat("\t", 33) + "x" + strings.Repeat("\t", 15),
		strings.Repeat("\x00", 40),
		strings.Repeat("\n", 40) + strings.Repeat(" ", 40),
		strings.Repeat("  x", 50),
		strings.Repeat("   \t\t\r\r\v", 20),
		strings.Repeat("a", 1000),
		"{\n" + strings.Repeat("    \"k\": [\n        1,\n        2\n    ],\n", 20) + "}",
	} {
		f.Add(s)
	}
	ps := testProfiles(f)
	f.Fuzz(func(t *testing.T, s string) {
		// Every offset up to 17, and with them every alignment of the
		// text to the blocks; then a few beyond, cut short.
		for off := range min(len(s), 18) {
			for _, sub := range []string{s[off:], s[off:max(off, len(s)-off/2)]} {
				for name, p := range ps {
					if got, want := p.count(sub), swarCount(p, sub); got != want {
						t.Fatalf("%s: count(%q) = %d, swarCount %d", name, sub, got, want)
					}
				}
			}
		}
	})
}
