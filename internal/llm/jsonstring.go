package llm

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONText returns the text of the JSON string value v (raw, quotes
// included), and false if v is not a string. The text of a string
// without escapes is v's own bytes, viewed; one with escapes is decoded
// onto the end of *buf and valid while *buf's bytes are, so a reader
// that resets *buf per event allocates nothing once *buf has grown.
// The reading is gjson's (Result.Str), so that both paths of a reader
// count the same text; see appendUnescaped.
func JSONText(v []byte, buf *[]byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return View(s), true
	}
	start := len(*buf)
	*buf = appendUnescaped(*buf, s)
	return View((*buf)[start:]), true
}

// DecodeJSONString returns the text of s, a JSON string's raw bytes
// between its quotes (a key's, say): s itself, viewed, when it holds no
// escape, else the text decoded into scratch (a small array on the
// caller's stack keeps that from allocating).
func DecodeJSONString(s, scratch []byte) string {
	if bytes.IndexByte(s, '\\') < 0 {
		return View(s)
	}
	return View(appendUnescaped(scratch[:0], s))
}

// JSONKeyIs reports whether key, an object key's raw bytes between its
// quotes, reads as name.
func JSONKeyIs(key []byte, name string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key) == name
	}
	if len(key) < len(name) {
		// Escapes only ever make the text shorter than its bytes.
		return false
	}
	var scratch [64]byte
	return DecodeJSONString(key, scratch[:]) == name
}

// appendUnescaped appends the text of s, the contents of a JSON string,
// to dst, decoding escapes exactly as gjson does: a raw control
// character, an unknown escape or a truncated one ends the text there;
// a \u escape whose four characters are not hex digits is U+0000; a
// surrogate pair is one rune, and a lone surrogate U+FFFD.
func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' {
			return dst
		}
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i == len(s) {
			return dst
		}
		switch s[i] {
		case '"', '\\', '/':
			dst = append(dst, s[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			if i+5 > len(s) {
				return dst
			}
			r := max(hex4(s[i+1:i+5]), 0) // gjson reads bad digits as 0
			next := i + 5
			if r >= 0xD800 && r < 0xDC00 && len(s)-next >= 6 && s[next] == '\\' && s[next+1] == 'u' {
				if r2 := hex4(s[next+2 : next+6]); r2 >= 0xDC00 && r2 < 0xE000 {
					r = utf16.DecodeRune(r, r2)
					next += 6
				}
			}
			dst = utf8.AppendRune(dst, r)
			i = next - 1
		default:
			return dst
		}
	}
	return dst
}
