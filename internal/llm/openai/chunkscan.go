package openai

import (
	"bytes"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// The cursor of the chunk fast path (see chunk.go): it reads an event's
// bytes in place, comparing them with what a chunk holds, and notes what
// the reader will act on.

// maxChunkTexts bounds the texts scanChunk notes in one event: the texts
// of a chunk are one per choice, or one per tool call.
const maxChunkTexts = 8

// chunkScan is the state of one scanChunk: the event, the position of
// the next byte to read, and what the reader will act on.
type chunkScan struct {
	b     []byte
	i     int
	depth int  // containers open at the position, the event itself included
	bad   bool // the event is not one scanChunk reads
	u     usageSpans
	texts [maxChunkTexts][]byte
	n     int // texts noted
}

// lit reads s if the bytes at the position are s. Comparing with a
// constant of up to 8 bytes compiles to a load or two; a longer one
// calls memequal, which costs more than the rest of reading the key, so
// a longer s is given to lit2 in two parts, or to lit2 and lit in three.
func (c *chunkScan) lit(s string) bool {
	if len(c.b)-c.i >= len(s) && string(c.b[c.i:c.i+len(s)]) == s {
		c.i += len(s)
		return true
	}
	return false
}

// lit2 reads a+b, each of up to 8 bytes, if the bytes at the position
// are a+b: one literal too long for lit, in two parts.
func (c *chunkScan) lit2(a, b string) bool {
	n := len(a) + len(b)
	if len(c.b)-c.i >= n && string(c.b[c.i:c.i+len(a)]) == a && string(c.b[c.i+len(a):c.i+n]) == b {
		c.i += n
		return true
	}
	return false
}

// at reports whether the byte at the position is ch.
func (c *chunkScan) at(ch byte) bool { return c.i < len(c.b) && c.b[c.i] == ch }

// open reads the opening bracket of a container.
func (c *chunkScan) open(bracket byte) bool {
	if !c.at(bracket) {
		return false
	}
	c.i++
	c.depth++
	return true
}

// next reads what follows a member or an element: a comma, before
// another (true), or the container's closing bracket (false). At
// anything else it sets bad. It also sets bad, for an object, when what
// follows the comma is not the start of a key: a caller may look at the
// first letter of the key.
func (c *chunkScan) next(closing byte) bool {
	if c.bad || c.i >= len(c.b) {
		c.bad = true
		return false
	}
	switch c.b[c.i] {
	case ',':
		c.i++
		if closing == '}' && (len(c.b)-c.i < 2 || c.b[c.i] != '"') {
			c.bad = true
			return false
		}
		return true
	case closing:
		c.i++
		c.depth--
		return false
	}
	c.bad = true
	return false
}

// first reads the closing bracket of an empty container (false), or
// reports that a member or element follows (true); for an object, bad is
// set unless a key starts there.
func (c *chunkScan) first(closing byte) bool {
	if c.at(closing) {
		c.i++
		c.depth--
		return false
	}
	if closing == '}' && (len(c.b)-c.i < 2 || c.b[c.i] != '"') {
		c.bad = true
		return false
	}
	return true
}

// skip reads the value at the position, which nothing reads: a string,
// null or a small integer directly, anything else with the scanner. A
// container is skipped within the depth scanEvent's scan allows it: that
// scan skips the value of each top-level member whole, with at most
// llm.MaxScanDepth levels of containers.
func (c *chunkScan) skip() bool {
	if c.i < len(c.b) {
		switch ch := c.b[c.i]; {
		case ch == '"':
			if c.str() {
				return true
			}
		case ch == 'n':
			if c.lit("null") {
				return true
			}
		case ch >= '0' && ch <= '9':
			if c.digits() {
				return true
			}
		}
	}
	end, ok := llm.ValueEnd(c.b, c.i, llm.MaxScanDepth+1-c.depth)
	c.i = end
	return ok
}

// str reads the string at the position when its closing quote is the
// first quote after it and has no backslash before it, and reports
// whether it did: any other string is left to the scanner.
func (c *chunkScan) str() bool {
	if !c.at('"') {
		return false
	}
	k := bytes.IndexByte(c.b[c.i+1:], '"')
	if k < 0 {
		return false
	}
	q := c.i + 1 + k
	if c.b[q-1] == '\\' {
		return false
	}
	c.i = q + 1
	return true
}

// atDigit reports whether the position holds a digit (digits reads the
// number that starts with it).
func (c *chunkScan) atDigit() bool { return c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' }

// digits reads the non-negative integer without fraction or exponent at
// the position, if a comma or a closing bracket follows it, and reports
// whether it did: any other number is left to the scanner.
func (c *chunkScan) digits() bool {
	i := c.i + 1
	if c.b[c.i] != '0' {
		for i < len(c.b) && c.b[i] >= '0' && c.b[i] <= '9' {
			i++
		}
	}
	if i < len(c.b) && (c.b[i] == ',' || c.b[i] == '}' || c.b[i] == ']') {
		c.i = i
		return true
	}
	return false
}

// text reads a value whose text, if it is a string, the reader counts
// (countValue counts nothing of any other value).
func (c *chunkScan) text() bool {
	if !c.at('"') {
		return c.skip()
	}
	if c.n == maxChunkTexts {
		return false
	}
	start := c.i
	if !c.str() {
		end, ok := llm.ValueEnd(c.b, c.i, 0)
		if !ok {
			return false
		}
		c.i = end
	}
	c.texts[c.n] = c.b[start:c.i]
	c.n++
	return true
}

// otherKey reads the key at the position, one the caller does not know
// by its bytes, with its colon. It refuses a key with an escape (whose
// text could be any name) and a key in names (one the caller acts on,
// here spelled in a way it did not expect).
func (c *chunkScan) otherKey(names ...string) bool {
	if !c.at('"') {
		return false
	}
	end := bytes.IndexByte(c.b[c.i+1:], '"')
	if end < 0 {
		return false
	}
	key := c.b[c.i+1 : c.i+1+end]
	if bytes.IndexByte(key, '\\') >= 0 {
		return false
	}
	for _, name := range names {
		if string(key) == name {
			return false
		}
	}
	c.i += end + 2
	return c.lit(":")
}
