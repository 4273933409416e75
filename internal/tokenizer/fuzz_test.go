package tokenizer

import (
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
