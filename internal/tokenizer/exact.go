package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Exact counting feeds the text to tiktoken-go in pieces cut where the
// tokenizers' own pre-splitting would cut anyway, so that the count is
// the same as for the whole text. The pieces matter because tiktoken-go's
// byte-pair merge is quadratic in the length of a pre-split word: 100 KB of
// letters without a break takes seconds. A stretch longer than
// maxExactSegment without a safe cut is counted by the approximation
// instead, which bounds the work per byte.
const (
	maxExactSegment = 512
	// exactBatch is how much text goes to the tokenizer per call.
	exactBatch = 64 << 10
)

// exactCount counts text with the named encoding, approximating with p
// only the stretches too long to tokenise safely. ok is false when the
// encoding cannot be loaded.
func exactCount(enc, text string, p *profile) (n int64, ok bool) {
	e, err := encoding(enc)
	if err != nil {
		return 0, false
	}
	var total int64
	start := 0 // of the batch being gathered
	last := 0  // the last safe cut
	flush := func(end int) {
		if end > start {
			total += int64(len(e.EncodeOrdinary(text[start:end])))
		}
		start = end
	}
	for _, cut := range cuts(text) {
		if cut-last > maxExactSegment {
			flush(last)
			total += p.tokens(text[last:cut], 1)
			start = cut
		} else if cut-start > exactBatch {
			flush(last)
		}
		last = cut
	}
	flush(last)
	return total, true
}

// cuts returns the offsets at which text can be split without changing
// its tokenisation, ending with len(text). Both encodings pre-split text
// with a regular expression whose matches never run from a letter or
// digit into a following character of another kind, except into
// combining marks, contractions ('s, 't, …) and more digits; the match
// after such a cut starts fresh, and no match looks behind it.
func cuts(text string) []int {
	var out []int
	prev := rune(-1)
	for i, r := range text {
		if prev >= 0 && splits(prev, r) {
			out = append(out, i)
		}
		prev = r
		if r == utf8.RuneError {
			prev = -1 // invalid bytes: never cut next to them
		}
	}
	return append(out, len(text))
}

// splits reports whether a pre-split word always ends between a and b.
func splits(a, b rune) bool {
	if b == '\'' || unicode.IsMark(b) {
		return false
	}
	switch {
	case unicode.IsLetter(a):
		return !unicode.IsLetter(b)
	case unicode.IsNumber(a):
		return !unicode.IsNumber(b)
	}
	return false
}
