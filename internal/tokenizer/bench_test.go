package tokenizer

import (
	"strings"
	"testing"
)

// benchText is a mix of the accuracy corpora (prose, code, JSON, CJK,
// emoji, base64), repeated to size: the approximation's speed depends on
// how often runs leave its unrolled loop, so a mix is fairer than either
// extreme.
func benchText(tb testing.TB) string {
	var b strings.Builder
	cs := corpora(tb)
	for i := 0; b.Len() < 1<<20; i++ {
		for _, c := range cs {
			b.WriteString(c.samples[i%len(c.samples)])
		}
	}
	return b.String()
}

func benchSizes(b *testing.B, f func(b *testing.B, text string)) {
	full := benchText(b)
	for _, size := range []struct {
		name string
		n    int
	}{{"4KB", 4 << 10}, {"1MB", 1 << 20}} {
		text := full[:size.n]
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			f(b, text)
		})
	}
}

// BenchmarkApproximate measures the approximation:
//
//	go test ./internal/tokenizer -run '^$' -bench . -benchtime 2s
func BenchmarkApproximate(b *testing.B) {
	c, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	benchSizes(b, func(b *testing.B, text string) {
		for b.Loop() {
			c.CountTokens("gpt-4o", text)
		}
	})
}

// BenchmarkExact measures exact o200k counting (without the load, which
// happens once before the timer starts).
func BenchmarkExact(b *testing.B) {
	c, err := New(Config{Mode: ModeExact, ExactMaxBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	c.CountTokens("gpt-4o", "warm up")
	benchSizes(b, func(b *testing.B, text string) {
		for b.Loop() {
			c.CountTokens("gpt-4o", text)
		}
	})
}
