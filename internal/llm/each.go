package llm

import (
	"math/bits"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// ForEach calls fn with each member of the object v, or each element of
// the array v, as v.ForEach does (the same keys and values, Index and
// all), until fn returns false. It is for the parts of a request body
// that CheckBody has accepted: the body is known to be valid JSON, so
// ForEach finds where each value ends without checking its syntax again,
// and finds the end of a string with a word-at-a-time scan and
// strings.IndexByte instead of gjson's byte-at-a-time loop. A request's
// parse walks its messages this way twice (skipping each message, then
// reading inside it), and gjson's walk was most of an estimate's time.
//
// On JSON that is not valid ForEach stops early or yields values gjson
// would not, but it reads nothing outside v.Raw and never panics.
func ForEach(v gjson.Result, fn func(key, value gjson.Result) bool) {
	if v.Type != gjson.JSON || v.Indexes != nil {
		// Scalars and query results: gjson's own, which handles them.
		v.ForEach(fn)
		return
	}
	s := v.Raw
	i := trustedSpace(s, 0)
	if i >= len(s) {
		return
	}
	var key, value gjson.Result
	object := false
	switch s[i] {
	case '{':
		object, key.Type = true, gjson.String
	case '[':
		key.Type, key.Num = gjson.Number, -1
	default:
		return
	}
	i++
	for {
		// Between members: whitespace and at most one comma.
		i = trustedSpace(s, i)
		if i < len(s) && s[i] == ',' {
			i = trustedSpace(s, i+1)
		}
		if i >= len(s) || s[i] == '}' || s[i] == ']' {
			return
		}
		if object {
			if s[i] != '"' {
				return
			}
			end, escaped := trustedStringEnd(s, i)
			if end > len(s) {
				return
			}
			key.Raw, key.Index = s[i:end], i+v.Index
			key.Str = stringValue(key.Raw, escaped)
			i = trustedSpace(s, end)
			if i >= len(s) || s[i] != ':' {
				return
			}
			i = trustedSpace(s, i+1)
		} else {
			key.Num++
		}
		end := trustedValue(s, i, &value)
		if end > len(s) {
			return
		}
		value.Index = i + v.Index
		if !fn(key, value) {
			return
		}
		i = end
	}
}

// trustedValue sets r to the value that starts at s[i] and returns where
// it ends; an end past len(s) when there is none. It fills a Result of
// the caller's rather than returning one: a Result is ten words, and
// copying it out was a good part of a walk's time.
func trustedValue(s string, i int, r *gjson.Result) int {
	*r = gjson.Result{}
	if i >= len(s) {
		return len(s) + 1
	}
	end := len(s) + 1
	switch c := s[i]; c {
	case '"':
		var escaped bool
		end, escaped = trustedStringEnd(s, i)
		if end <= len(s) {
			r.Type, r.Raw = gjson.String, s[i:end]
			r.Str = stringValue(r.Raw, escaped)
		}
	case '{', '[':
		end = trustedContainerEnd(s, i)
		if end <= len(s) {
			r.Type, r.Raw = gjson.JSON, s[i:end]
		}
	case 't':
		if strings.HasPrefix(s[i:], "true") {
			r.Type, r.Raw, end = gjson.True, s[i:i+4], i+4
		}
	case 'f':
		if strings.HasPrefix(s[i:], "false") {
			r.Type, r.Raw, end = gjson.False, s[i:i+5], i+5
		}
	case 'n':
		if strings.HasPrefix(s[i:], "null") {
			r.Type, r.Raw, end = gjson.Null, s[i:i+4], i+4
		}
	default:
		if c == '-' || '0' <= c && c <= '9' {
			end = i + 1
			for end < len(s) && numberByte[s[end]] {
				end++
			}
			r.Type, r.Raw = gjson.Number, s[i:end]
			r.Num, _ = strconv.ParseFloat(r.Raw, 64)
		}
	}
	return end
}

// numberByte is set for the bytes that continue a JSON number.
var numberByte = [256]bool{'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true,
	'7': true, '8': true, '9': true, '.': true, 'e': true, 'E': true, '+': true, '-': true}

// stringValue returns what the string raw (quotes included) holds: raw
// without its quotes, or, when it has escapes, raw unescaped as gjson
// unescapes it.
func stringValue(raw string, escaped bool) string {
	if escaped {
		return gjson.Parse(raw).Str
	}
	return raw[1 : len(raw)-1]
}

// trustedStringEnd returns the end of the valid JSON string whose opening
// quote is s[i] (the index after its closing quote, or len(s)+1 when it
// has none) and whether it holds an escape. Most strings of a request
// are short (keys, roles, a sentence), and are read eight bytes at a
// time; a string with no quote or backslash in its first 16 bytes is
// long, and is searched with strings.IndexByte, which is vectorised.
func trustedStringEnd(s string, i int) (int, bool) {
	j := i + 1
	for n := 0; n < 2 && j+8 <= len(s); n++ {
		if m := quoteOrBackslash(load64(s, j)); m != 0 {
			j += bits.TrailingZeros64(m) >> 3
			if s[j] == '"' {
				return j + 1, false
			}
			break
		}
		j += 8
	}
	// A long string, or one with an escape: find the first quote that
	// an even number of backslashes precede. Bytes before j hold no
	// backslash.
	escaped := false
	for {
		k := strings.IndexByte(s[j:], '"')
		if k < 0 {
			return len(s) + 1, escaped
		}
		q := j + k
		if !escaped {
			escaped = strings.IndexByte(s[j:q], '\\') >= 0
		}
		n := 0
		for p := q - 1; p > i && s[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, escaped
		}
		j = q + 1
	}
}

// load64 returns the eight bytes of s at i, little-endian; i+8 must be
// at most len(s), which every caller's loop bound says. The load goes
// through unsafe so that it is one instruction, without the bounds
// checks and byte assembly that binary.LittleEndian costs on a slice
// made for it.
func load64(s string, i int) uint64 {
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), i))
}

// quoteOrBackslash returns the high bit of each byte of w (eight bytes of
// a string, little-endian) that is a quote or a backslash. Bits above the
// lowest one may be set for other bytes (a borrow runs upwards); the
// lowest one is always right.
func quoteOrBackslash(w uint64) uint64 {
	q := w ^ (lsbs * '"')
	b := w ^ (lsbs * '\\')
	return ((q-lsbs)&^q | (b-lsbs)&^b) & msbs
}

// trustedContainerEnd returns the end of the valid object or array that
// starts at s[i], or len(s)+1 when it does not end. It counts brackets
// outside strings; validity makes that enough.
func trustedContainerEnd(s string, i int) int {
	depth := 0
	for i < len(s) {
		switch s[i] {
		case '"':
			i, _ = trustedStringEnd(s, i)
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
		i++
		// Skip what cannot open or close anything: numbers, literals,
		// separators and space.
		for i < len(s) && !structural[s[i]] {
			i++
		}
	}
	return len(s) + 1
}

// structural is set for the bytes trustedContainerEnd stops at.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// trustedSpace returns the index of the first byte at or after i that is
// not JSON whitespace.
func trustedSpace(s string, i int) int {
	for i < len(s) && s[i] <= ' ' {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}
