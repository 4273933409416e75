package llm

import (
	"math"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// ReadCount reads a token count the way settlement may trust it: ok is
// false for a count that is there but not unambiguously a non-negative
// JSON integer. A string ("100"), a boolean, null, an object, a negative
// count, a fraction (1.5) and anything JSON does not allow as a number
// but a lenient parser reads as one (00, +100, .5) are all unreadable:
// clients read such counts differently (an SDK that reads "100" as 100,
// a parser that reads 00 as 0), and reading them as zero, as TokenCount
// does, would let an upstream settle a request below what it reports.
// A readable count reads as TokenCount reads it: 1e30 is an integer,
// booked as accounting.MaxTokens.
func ReadCount(v gjson.Result) (n int64, ok bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	if n, ok := plainCountOf(BytesView(v.Raw)); ok {
		return n, true
	}
	if !countable(v.Raw) {
		return 0, false
	}
	return TokenCount(v), true
}

// plainCountOf reads a count of digits alone, as providers send every
// count, without a leading zero: what countable and TokenCount would
// read, at a fraction of their cost (usage is read on every event of a
// Gemini stream). It reports false for anything else.
func plainCountOf(v []byte) (int64, bool) {
	if n, ok := plainCount(v); ok && len(v) > 0 && (v[0] != '0' || len(v) == 1) {
		return accounting.ClampTokens(n), true
	}
	return 0, false
}

// ReadCountRaw is ReadCount of a raw JSON value, as the stream readers'
// fast paths find it.
func ReadCountRaw(v []byte) (n int64, ok bool) {
	if n, ok := plainCountOf(v); ok {
		return n, true
	}
	if !countable(View(v)) {
		return 0, false
	}
	return TokenCount(gjson.Result{Type: gjson.Number, Raw: View(v)}), true
}

// countable reports whether s is a JSON number, by JSON's grammar, that
// is a non-negative integer: no sign, no leading zero, and no fraction
// left once the exponent is applied (a count too large for a float64's
// precision is taken as the integer it stands for).
func countable(s string) bool {
	i, n := 0, len(s)
	digits := func() int {
		start := i
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	switch {
	case n == 0:
		return false
	case s[0] == '0':
		i = 1
	case digits() == 0:
		return false
	}
	if i == n {
		return true
	}
	if s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	if i != n {
		return false
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case math.IsInf(f, 1):
		return true
	case err != nil:
		return false
	case f == 0:
		// A float64 reads 1e-400 as zero: only a zero is one.
		for _, c := range s {
			if c >= '1' && c <= '9' {
				return false
			}
			if c == 'e' || c == 'E' {
				break
			}
		}
		return true
	}
	return f == math.Floor(f)
}
