package llm

import (
	"hash/maphash"

	"github.com/tidwall/gjson"
)

// A wire format may read the usual shape of its requests in a pass of its
// own, quicker than a Scan because it knows the shape, and leave every
// other body to the Scan (see the OpenAI chat parse). What it accepts, the
// check must accept, and its reading must be the Scan's. The functions
// here read values as the check does, and build what a Scan would hand
// over, so that such a pass needs no rules of its own.

// StringEnd reads the JSON string in b whose opening quote is at i, and
// returns where it ends (just past its closing quote) and whether it
// holds an escape; ok is false for a string CheckBody refuses (a bad
// escape, a control character, invalid UTF-8, no closing quote).
func StringEnd(b []byte, i int) (end int, escaped, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false, false
	}
	end, escaped, fault := stringEnd(b, i+1)
	return end, escaped, fault == noFault
}

// NumberEnd reads the JSON number in b at i, and returns where it ends;
// ok is false for what is not a number as CheckBody reads one.
func NumberEnd(b []byte, i int) (end int, ok bool) {
	if i >= len(b) {
		return i, false
	}
	return numberEnd(b, i)
}

// ResultAt returns the value b[start:end], which the check would accept,
// as gjson reads it, as [Scan.Top] returns a top-level field.
func ResultAt(b []byte, start, end int) gjson.Result {
	return topValue(View(b[start:end]), start)
}

// ShapeWith returns the Shape of body, an object the check would accept
// against fields, whose top-level members are the fields whose bits
// (1<<[Fields.Slot]) are in members, as [Scan.Shape] returns it.
func ShapeWith(body []byte, fields *Fields, members uint64) Shape {
	return newShape(body, fields, members)
}

// A ValueChecker checks the values of a body one after another, as the
// check reads them, and keeps what the check allocates (room for levels
// past the sixteenth, key tables) from one to the next, so that a body of
// many values costs no more than the check of the whole body would. The
// zero ValueChecker is ready for use.
type ValueChecker struct {
	c      checker
	seeded bool
}

// Check reads the JSON value in b at i, inside outer open objects and
// arrays, as the check reads the value of a member that fields describe
// (nil for a member that declares no fields: any keys, each object's
// distinct once decoded and folded), at most MaxDepth levels in all, and
// returns where it ends; ok is false for a value the check refuses.
func (v *ValueChecker) Check(b []byte, i, outer int, fields *Fields) (end int, ok bool) {
	c := &v.c
	if !v.seeded {
		c.seed, v.seeded = maphash.MakeSeed(), true
	}
	c.body, c.single, c.outer = b, true, outer
	c.depth, c.nkeys, c.pos, c.next, c.resume = 0, 0, i, fields, false
	if _, err := c.run(); err != nil {
		return i, false
	}
	return c.pos, true
}

// SkipSpace returns the index of the first byte of b at or after i that
// is not JSON whitespace.
func SkipSpace(b []byte, i int) int { return skipSpace(b, i) }
