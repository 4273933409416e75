package llm

import (
	"unicode"
	"unicode/utf8"
)

// appendFold appends the case-folded form of key (valid UTF-8) to out:
// two keys fold to the same bytes exactly when bytes.EqualFold reports
// them equal, which is how Go's encoding/json matches an object key to a
// struct field. Each rune becomes the smallest rune of its simple case
// folding orbit, so that "k", "K" and the Kelvin sign U+212A all become
// "K", and "s", "S" and the long s U+017F all become "S".
func appendFold(out, key []byte) []byte {
	for i := 0; i < len(key); {
		c := key[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(key[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return out
}

// foldRune returns the smallest rune of r's simple case folding orbit.
// unicode.SimpleFold walks the orbit in increasing order and wraps around
// to its smallest member.
func foldRune(r rune) rune {
	smallest := r
	for next := unicode.SimpleFold(r); next != r; next = unicode.SimpleFold(next) {
		smallest = min(smallest, next)
	}
	return smallest
}
