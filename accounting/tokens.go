package accounting

import "unicode/utf8"

// TokenCounter estimates how many tokens a text costs for a model.
// Implementations must be safe for concurrent use and should rather count
// a little too many tokens than too few: an estimate that is too low lets
// concurrent requests overshoot a limit.
type TokenCounter interface {
	CountTokens(model string, text string) int64
}

// Approximate counts tokens from characters: ASCII text at CharsPerToken
// characters per token, and every other character as one token. CJK text
// runs at about 1.3–1.7 characters per token, so counting one per
// character keeps the estimate on the safe side for it, where a flat
// characters-per-token rate would under-count it two to three times.
type Approximate struct {
	// CharsPerToken is the rate for ASCII text; zero means 4.
	CharsPerToken float64
}

// CountTokens implements TokenCounter.
func (a Approximate) CountTokens(_ string, text string) int64 {
	cpt := a.CharsPerToken
	if cpt <= 0 {
		cpt = 4
	}
	var ascii, other int64
	for i := 0; i < len(text); i++ {
		b := text[i]
		switch {
		case b < utf8.RuneSelf:
			ascii++
		case b >= 0xC0: // a multi-byte sequence's leading byte: one character
			other++
		}
	}
	n := int64(float64(ascii)/cpt+0.999999) + other
	return n
}
