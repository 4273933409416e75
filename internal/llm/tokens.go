package llm

import (
	"math"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// TokenCount reads a token count from a provider's usage report, within
// 0..accounting.MaxTokens whatever the provider sends: a count is a JSON
// number, and anything else (null, a string) counts as zero; a negative
// count, which no provider sends, as zero rather than as a refund; a
// fraction is rounded down; and a count too large to book, such as 1e30
// or 9223372036854775808, as accounting.MaxTokens. gjson's Int would
// clamp 1e30 to the largest int64, and two of those add up to a negative
// number. The usage readers read counts with ReadCount, which reads a
// readable count with it.
func TokenCount(v gjson.Result) int64 {
	if v.Type != gjson.Number {
		return 0
	}
	if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
		return accounting.ClampTokens(n)
	}
	// An exponent, a fraction or an integer beyond int64. ParseFloat
	// gives ±Inf for what overflows a float64, which clamps as well.
	f, _ := strconv.ParseFloat(v.Raw, 64)
	switch {
	case !(f > 0): // negative, zero or NaN
		return 0
	case f >= accounting.MaxTokens:
		return accounting.MaxTokens
	}
	return int64(math.Floor(f))
}

// plainCount reads a count of digits alone, as providers send every
// count, short enough not to overflow: what ParseInt would read, at a
// fraction of its cost, which was most of reading a streamed usage
// object (see ReadCountRaw).
func plainCount(v []byte) (int64, bool) {
	if len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
