package llm

import (
	"bytes"
	"unsafe"
)

// The stream readers' hot path reads each event's JSON straight from its
// bytes: gjson walks an event a byte at a time and unescapes every
// escaped string into a new allocation, which made it most of a
// streamed response's cost. Here strings are skipped with
// bytes.IndexByte, nothing is allocated, and a value is read only where
// a reader asks for it.
//
// These helpers accept well-formed JSON only (RFC 8259's grammar, with
// two liberties that gjson takes too: string contents are not checked
// for control characters, escapes or valid UTF-8), with values nested
// no deeper than MaxScanDepth inside the container scanned. A reader that gets anything else from them hands the
// event to its gjson path, whose reading of malformed input it keeps:
// what a reader reports never depends on which path read an event, and
// each reader's fuzz test holds the two to that. Where they read a
// value, they read it as gjson does (see AppendJSONString).

// MaxScanDepth bounds the nesting of containers the scanner follows
// inside the one it iterates over; deeper JSON is left to gjson, which
// needs no stack to skip it.
const MaxScanDepth = 64

// JSONIter iterates over the members of a JSON object or the elements of
// an array, validating each value as it skips it.
type JSONIter struct {
	b      []byte
	i      int
	object bool
	first  bool // no member read yet
	end    bool // the container's closing bracket was read
	bad    bool // malformed input was found
}

// ScanObject returns an iterator over the members of the object that b
// holds, with only whitespace around it.
func ScanObject(b []byte) JSONIter { return scan(b, '{') }

// ScanArray returns an iterator over the elements of the array that b
// holds, with only whitespace around it.
func ScanArray(b []byte) JSONIter { return scan(b, '[') }

func scan(b []byte, open byte) JSONIter {
	i := scanSpace(b, 0)
	if i == len(b) || b[i] != open {
		return JSONIter{bad: true, end: true}
	}
	return JSONIter{b: b, i: i + 1, object: open == '{', first: true}
}

// Next returns the next member: its key (for an object: the raw bytes
// between the quotes, escapes and all) and its value (raw, without
// surrounding whitespace). ok is false past the last member and at
// malformed input.
func (it *JSONIter) Next() (key, value []byte, ok bool) {
	if it.end {
		return nil, nil, false
	}
	b, i := it.b, scanSpace(it.b, it.i)
	if i == len(b) {
		return it.fail()
	}
	closing := byte(']')
	if it.object {
		closing = '}'
	}
	switch {
	case b[i] == closing && it.first:
		it.end, it.i = true, i+1
		return nil, nil, false
	case !it.first:
		if b[i] == closing {
			it.end, it.i = true, i+1
			return nil, nil, false
		}
		if b[i] != ',' {
			return it.fail()
		}
		i = scanSpace(b, i+1)
	}
	it.first = false
	if it.object {
		if i == len(b) || b[i] != '"' {
			return it.fail()
		}
		end, ok := scanString(b, i)
		if !ok {
			return it.fail()
		}
		key = b[i+1 : end-1]
		i = scanSpace(b, end)
		if i == len(b) || b[i] != ':' {
			return it.fail()
		}
		i = scanSpace(b, i+1)
	}
	end, ok := scanValue(b, i)
	if !ok {
		return it.fail()
	}
	it.i = end
	return key, b[i:end], true
}

func (it *JSONIter) fail() (key, value []byte, ok bool) {
	it.bad, it.end = true, true
	return nil, nil, false
}

// WellFormed reports, once Next has returned false, whether the input
// was one well-formed container with nothing but whitespace after it.
func (it *JSONIter) WellFormed() bool {
	return it.end && !it.bad && scanSpace(it.b, it.i) == len(it.b)
}

// scanSpace returns the index of the first byte at or after i that is
// not JSON whitespace.
func scanSpace(b []byte, i int) int {
	// Most calls find no whitespace at all: one comparison decides.
	for i < len(b) && b[i] <= ' ' {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString returns the end of the string whose opening quote is b[i]:
// the index after its closing quote, the first quote not escaped by an
// odd number of backslashes.
func scanString(b []byte, i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b), false
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, true
		}
		j = q + 1
	}
}

// scanValue returns the end of the well-formed value that starts at
// b[i], and false if it is not one.
func scanValue(b []byte, i int) (int, bool) {
	if i == len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		return scanContainer(b, i, MaxScanDepth)
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	}
	return scanNumber(b, i)
}

func scanLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// scanNumber skips -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = scanDigits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := scanDigits(b, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := scanDigits(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func scanDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// scanContainer returns the end of the well-formed object or array
// that starts at b[i], with at most limit levels of containers (itself
// included; limit <= MaxScanDepth). It keeps the kind of each open
// container in a bit of a word, so it needs neither a stack nor
// recursion.
func scanContainer(b []byte, i, limit int) (int, bool) {
	const (
		opening = iota // b[i] opens a container
		member         // a member or element starts at b[i]
		after          // a value ended at b[i]
	)
	var objects uint64 // bit d: the container at depth d+1 is an object
	depth := 0
	// closing is the innermost open container's closing bracket.
	var closing byte
	for state := opening; ; {
		switch state {
		case opening:
			if depth == limit {
				return i, false
			}
			if b[i] == '{' {
				objects |= 1 << depth
				closing = '}'
			} else {
				objects &^= 1 << depth
				closing = ']'
			}
			depth++
			i = scanSpace(b, i+1)
			if i < len(b) && b[i] == closing {
				// An empty container: read its end as after a value.
				state = after
				continue
			}
			state = member
		case member:
			if closing == '}' {
				if i == len(b) || b[i] != '"' {
					return i, false
				}
				end, ok := scanString(b, i)
				if !ok {
					return i, false
				}
				i = scanSpace(b, end)
				if i == len(b) || b[i] != ':' {
					return i, false
				}
				i = scanSpace(b, i+1)
			}
			if i < len(b) && (b[i] == '{' || b[i] == '[') {
				state = opening
				continue
			}
			end, ok := scanValue(b, i)
			if !ok {
				return i, false
			}
			i, state = scanSpace(b, end), after
		case after:
			switch {
			case i == len(b):
				return i, false
			case b[i] == ',':
				i, state = scanSpace(b, i+1), member
			case b[i] == closing:
				depth--
				if depth == 0 {
					return i + 1, true
				}
				closing = ']'
				if objects>>(depth-1)&1 == 1 {
					closing = '}'
				}
				i = scanSpace(b, i+1)
			default:
				return i, false
			}
		}
	}
}

// ScanValues returns an iterator over what gjson's ForEach yields as
// values: an array's elements, an object's member values (keys are
// returned too), and nothing for any other value.
func ScanValues(v []byte) JSONIter {
	if len(v) > 0 {
		switch v[0] {
		case '[':
			return ScanArray(v)
		case '{':
			return ScanObject(v)
		}
	}
	return JSONIter{end: true}
}

// JSONMember returns the value of the first member of object obj
// (whitespace around it allowed) whose key reads as name, as gjson's Get
// does for a plain key; nothing when obj is not an object.
func JSONMember(obj []byte, name string) ([]byte, bool) {
	it := ScanObject(obj)
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		if JSONKeyIs(k, name) {
			return v, true
		}
	}
	return nil, false
}

// JSONPath returns the value at a dotted path of plain keys inside
// object obj, as gjson's Get finds it: at each step the first member of
// that name whose value holds the rest of the path (an object without
// it, or a value of another kind, is passed over for a later member of
// the same name); at the last step, the first member of that name.
func JSONPath(obj []byte, keys ...string) ([]byte, bool) {
	if len(keys) == 1 {
		return JSONMember(obj, keys[0])
	}
	if len(keys) == 0 {
		return nil, false
	}
	it := ScanObject(obj)
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		if !JSONKeyIs(k, keys[0]) {
			continue
		}
		if found, ok := JSONPath(v, keys[1:]...); ok {
			return found, true
		}
	}
	return nil, false
}

// WellFormedObject reports whether b holds one well-formed JSON object
// (see ScanObject), nested no deeper than MaxScanDepth: the condition on
// which a reader may read an event with the scanner rather than gjson.
func WellFormedObject(b []byte) bool {
	it := ScanObject(b)
	for _, _, ok := it.Next(); ok; _, _, ok = it.Next() {
	}
	return it.WellFormed()
}

// JSONMembers finds, in one pass over object obj (whitespace around it
// allowed), the first member of each of names: values[i] is the value of
// names[i], nil when there is none. It reports whether obj is
// well-formed; when it is not, the values mean nothing. A reader that
// navigates an event with gjson reads the leaf object whose strings it
// counts with it, so that escaped text is decoded without allocating,
// and falls back to gjson when the object is not well-formed.
func JSONMembers(obj []byte, names []string, values [][]byte) bool {
	clear(values)
	it := ScanObject(obj)
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		for i, name := range names {
			if values[i] == nil && JSONKeyIs(k, name) {
				values[i] = v
			}
		}
	}
	return it.WellFormed()
}

// BytesView returns s's bytes without copying, for the scanner to read
// a gjson result's raw JSON. They must not be modified.
func BytesView(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// ValueEnd returns the end of the well-formed value that starts at b[i]
// (no whitespace before it), with at most depth levels of containers
// (MaxScanDepth at most), and false if there is none there: the
// scanner's grammar, for a reader's fast path that walks an event itself
// and skips the values it does not read. With depth MaxScanDepth, what
// ValueEnd accepts, ScanObject accepts as a member's value; a value
// inside a container that the scanner would skip whole, n levels down,
// must be given MaxScanDepth-n for the two to agree.
func ValueEnd(b []byte, i, depth int) (int, bool) {
	if i < len(b) && (b[i] == '{' || b[i] == '[') {
		if depth < 1 {
			return i, false
		}
		return scanContainer(b, i, min(depth, MaxScanDepth))
	}
	return scanValue(b, i)
}
