package llmtest

import (
	"unicode/utf8"

	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// Chars counts tokens from characters, for round figures in tests:
// ASCII text at PerToken characters per token, every other character as
// one token, and invalid bytes charged rather than free. Images are
// priced by the providers' formulas (tokenizer.ImageTokens), as the
// server prices them.
type Chars struct {
	// PerToken is the rate for ASCII text; zero means 4.
	PerToken float64
}

// CountTokens implements llm.Counter.
func (c Chars) CountTokens(_ string, text string) int64 {
	per := c.PerToken
	if per <= 0 {
		per = 4
	}
	var ascii, other int64
	for i := 0; i < len(text); i++ {
		switch b := text[i]; {
		case b < utf8.RuneSelf:
			ascii++
		case b >= 0xC0: // a multi-byte sequence's leading byte: one character
			other++
		}
	}
	return int64(float64(ascii)/per+0.999999) + other
}

// ImageTokens implements llm.Counter.
func (Chars) ImageTokens(model, detail string, width, height int) int64 {
	return tokenizer.ImageTokens(model, detail, width, height)
}
