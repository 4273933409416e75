package llm

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"unicode/utf8"
)

// MaxDepth is how deeply a request body may nest objects and arrays.
// The bound is what makes every later reader safe: gjson, and the JSON
// parsers of some providers, recurse once per level, and a body of 48 MiB
// of "[" would take a recursive reader past Go's 1 GB stack limit, a
// fatal error that no recover catches. 512 levels keep any recursive
// reader within a few hundred frames, are far beyond real requests (tool
// schemas, the deepest part of one, nest a few dozen levels), and are
// below the limits of the providers' own parsers (CPython's json stops
// near 1000 levels, Go's encoding/json at 10000), so no request a
// provider would serve is refused.
const MaxDepth = 512

// ErrNotObject is returned for a body that is valid JSON but not an object.
var ErrNotObject = errors.New("request body must be a JSON object")

// ErrTooDeep is returned for a body nested more than MaxDepth levels.
var ErrTooDeep = fmt.Errorf("request body nests objects and arrays more than %d levels deep", MaxDepth)

// CheckBody checks a request body before a wire format reads it, so that
// the wire format reads the request the provider will. The body must be
// one JSON object as RFC 8259 and encoding/json define it (nothing after
// it, valid escapes, no control characters in strings), in valid UTF-8,
// nested at most MaxDepth levels, in which
//
//   - no object, at any depth, has two keys that are equal once decoded
//     and case-folded: providers keep the last of duplicate keys and gjson
//     the first, so a second "max_tokens" or "model" would be read one
//     way here and another way upstream;
//   - no key is one of the names in fields, at the position fields
//     describes, in another case ("MAX_TOKENS", "Model", "ſtream"): Go's
//     encoding/json, which many OpenAI-compatible servers use, matches
//     keys to struct fields case-insensitively, Python's json and gjson
//     do not, so providers disagree on whether such a key is the field;
//   - no two keys are names of the same field (Gemini's generationConfig
//     and generation_config).
//
// Keys compare as encoding/json decodes them ("m\u006fdel" is "model"; an
// escaped surrogate that is not half of a pair is U+FFFD) and folded as
// encoding/json matches struct fields, with Unicode simple case folding:
// "K", "k" and the Kelvin sign K are one key, and so are "s", "S" and ſ.
//
// The check is one pass, iterative and bounded: a typical body is checked
// without allocating, and an object with very many keys gets a hash table
// of its own, so that 100,000 keys cost 100,000 lookups rather than their
// square. The errors it returns say what is wrong and where, for the
// client.
func CheckBody(body []byte, fields *Fields) error {
	c := checker{body: body}
	return c.checkBody(fields)
}

func (c *checker) checkBody(fields *Fields) error {
	if uint64(len(c.body)) >= math.MaxUint32 {
		// Key offsets are kept in 32 bits.
		return errors.New("request body is too large")
	}
	c.seed = maphash.MakeSeed()
	return c.check(fields)
}

// checker is the state of one CheckBody. The outer levels and the keys of
// small objects are kept in arrays, and nothing points into the checker,
// so that it stays on the goroutine's stack.
type checker struct {
	body []byte
	// seed makes key hashes unpredictable, so that no body can be built
	// whose keys collide.
	seed maphash.Seed
	// depth is the number of open objects and arrays; the outermost
	// inlineLevels are in levels, the rest in deeper.
	depth  int
	levels [inlineLevels]level
	deeper []level
	// keys are the keys of the open objects that have a few
	// (smallObject at most), each object's after those of the objects
	// around it; the first inlineKeys are in keys, the rest in moreKeys.
	// An object with more keys holds them in a table of its own.
	nkeys    int
	keys     [inlineKeys]keyEntry
	moreKeys []keyEntry
	// spare is the table of a closed object, for the next object with
	// many keys.
	spare []uint64
	// other and otherFold hold an earlier key, for comparisons and
	// messages.
	other, otherFold []byte
	// probes counts the earlier keys a new key is compared with, so that
	// a test can tell linear from quadratic.
	probes int
	// noShortKeys has every key read by anyKey: tests set it, to hold
	// shortKey to anyKey.
	noShortKeys bool
	// single has the checker read one value, not a whole body, and note
	// where it ends in pos; outer is how many levels are open around it
	// (see ValueChecker).
	single bool
	outer  int
	// capture, when set, captures top-level members as they are read (see
	// CheckTop).
	capture topCapture
	// escaped says whether the last string read held an escape.
	escaped bool
	// The state of a Scan's checker between runs (see run): where the
	// next run goes on, and how; whether the body is an object.
	pos    int
	next   *Fields
	resume bool
	object bool
	// visiting is set for a Scan's checker: it notes the members of the
	// visited objects in frames, one for each open one (the first
	// inlineFrames in frames, the rest in moreFrames), and stops after
	// each visited object or array, which closed describes.
	visiting   bool
	nframes    int
	frames     [inlineFrames]visitFrame
	moreFrames []visitFrame
	closed     closedLevel
}

// How many levels and keys a checker holds without allocating.
const (
	inlineLevels = 16
	inlineKeys   = 32
	inlineFrames = 4
)

// level is an open object or array.
type level struct {
	// fields describe the object, or the objects of the array.
	fields *Fields
	// seen are the bits of the fields the object has had.
	seen uint64
	// keys is where the object's keys begin in the checker's list, and
	// where the list is cut back to when the object closes.
	keys int
	// table holds the object's keys once it has more than smallObject
	// (see tableAdd); count is how many.
	table []uint64
	count int
	// lastKey is the offset of the object's latest key, which names the
	// member being read.
	lastKey int
	// element is the index of the array's current element.
	element int
	array   bool
	// visit is set for a level a Scan stops after (see Fields.Visit),
	// which starts at start. frame is the index of the visited object's
	// visitFrame, and member the slot of its member being read, when
	// the frame notes it; both are -1 otherwise.
	visit  bool
	start  int
	frame  int32
	member int32
}

// level returns open level d, the outermost being 0.
func (c *checker) level(d int) *level {
	if d < inlineLevels {
		return &c.levels[d]
	}
	return &c.deeper[d-inlineLevels]
}

// top returns the innermost open level.
func (c *checker) top() *level { return c.level(c.depth - 1) }

func (c *checker) push(array bool, fields *Fields, start int) error {
	if c.depth+c.outer == MaxDepth {
		return ErrTooDeep
	}
	lv := level{fields: fields, keys: c.nkeys, array: array, member: -1, frame: -1}
	if c.visiting && fields != nil && fields.visit {
		lv.visit, lv.start = true, start
		if !array {
			lv.frame = int32(c.pushFrame())
		}
	}
	if c.depth < inlineLevels {
		c.levels[c.depth] = lv
	} else {
		c.deeper = append(c.deeper[:c.depth-inlineLevels], lv)
	}
	c.depth++
	return nil
}

func (c *checker) pop() {
	top := c.top()
	if top.table != nil {
		// Keep the larger table for the next object with many keys.
		if cap(top.table) > cap(c.spare) {
			clear(top.table)
			c.spare = top.table
		}
		top.table = nil
	}
	c.nkeys = top.keys
	if top.frame >= 0 {
		c.nframes--
	}
	c.depth--
}

func (c *checker) check(fields *Fields) error {
	if err := c.begin(fields); err != nil {
		return err
	}
	for {
		stopped, err := c.run()
		if !stopped {
			return err
		}
	}
}

// begin readies the checker to read the body from its first value, which
// is read in fields.
func (c *checker) begin(fields *Fields) error {
	i := skipSpace(c.body, 0)
	if i == len(c.body) {
		return errors.New("request body is not valid JSON: it is empty")
	}
	c.object = c.body[i] == '{'
	c.pos, c.next = i, fields
	return nil
}

// run reads on from where begin or the last stop left the checker. It
// returns true when it stops just after a visited object or array has
// closed (see Scan; c.closed describes it), false when the body has been
// read, with its verdict. Only a Scan's checker visits; CheckBody's reads
// the body in one run.
func (c *checker) run() (bool, error) {
	b := c.body
	i, next := c.pos, c.next // what is read in the value at i
	// resume says the checker stopped just after a value, which is where
	// it goes on.
	resume := c.resume
	c.resume = false
	var err error
value:
	for {
		if !resume {
			if i >= len(b) {
				return false, c.syntaxError(i)
			}
			switch b[i] {
			case '{':
				if err = c.push(false, next, i); err != nil {
					return false, err
				}
				if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
					i++
					if c.close(i, true) {
						return c.stop(i, next)
					}
					break
				}
				if j, inner, ok := c.shortKey(i); ok {
					i, next = j, inner
				} else if i, next, err = c.anyKey(i); err != nil {
					return false, err
				}
				continue value
			case '[':
				if err = c.push(true, next, i); err != nil {
					return false, err
				}
				if i = skipSpace(b, i+1); i < len(b) && b[i] == ']' {
					i++
					if c.close(i, true) {
						return c.stop(i, next)
					}
					break
				}
				// The elements are read as the array is: next is unchanged.
				continue value
			case '"':
				i, err = c.str(i + 1)
			case 't':
				i, err = c.literal(i, "true")
			case 'f':
				i, err = c.literal(i, "false")
			case 'n':
				i, err = c.literal(i, "null")
			default:
				i, err = c.number(i)
			}
			if err != nil {
				return false, err
			}
		}
		resume = false
		// After a value: close what it ends, then move on to the next
		// element or member.
		for {
			if c.depth == 0 {
				if c.single {
					c.pos = i
					return false, nil
				}
				i = skipSpace(b, i)
				if i < len(b) {
					return false, c.syntaxError(i)
				}
				if !c.object {
					return false, ErrNotObject
				}
				return false, nil
			}
			top := c.top()
			if top.member >= 0 {
				c.memberEnds(top, i)
			}
			if c.capture.on && c.depth == 1 {
				c.capture.valueEnds(i)
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return false, c.syntaxError(i)
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
				if !top.array {
					if j, inner, ok := c.shortKey(i); ok {
						i, next = j, inner
					} else if i, next, err = c.anyKey(i); err != nil {
						return false, err
					}
					continue value
				}
				top.element++
				if i < len(b) && ('0' <= b[i] && b[i] <= '9' || b[i] == '-') {
					// The next of many numbers, such as token ids,
					// without the round trip through the value switch.
					if i, err = c.number(i); err != nil {
						return false, err
					}
					continue
				}
				next = top.fields
				continue value
			case ']':
				if !top.array {
					return false, c.syntaxError(i)
				}
			case '}':
				if top.array {
					return false, c.syntaxError(i)
				}
			default:
				return false, c.syntaxError(i)
			}
			i++
			if c.close(i, false) {
				return c.stop(i, next)
			}
		}
	}
}

// stop notes where run stopped, just after a value at i, for the next run
// to go on from.
func (c *checker) stop(i int, next *Fields) (bool, error) {
	c.pos, c.next, c.resume = i, next, true
	return true, nil
}

// str reads the rest of a string, from i just after its opening quote,
// and returns where it ends (see stringEnd).
func (c *checker) str(i int) (int, error) {
	end, escaped, fault := stringEnd(c.body, i)
	if fault != noFault {
		return end, c.stringError(fault, end)
	}
	c.escaped = escaped
	return end, nil
}

// stringFault is what is wrong with a string stringEnd read.
type stringFault uint8

const (
	noFault      stringFault = iota
	faultEnd                 // no closing quote: the body ends
	faultControl             // a control character
	faultEscape              // an invalid escape
	faultUTF8                // invalid UTF-8
)

// stringEnd reads the rest of a string in b, from i just after its
// opening quote, and returns where it ends (just past its closing quote)
// and whether it holds an escape; or a fault, and where it is. Runs of
// plain text, the bulk of a prompt, are skipped sixteen bytes at a time;
// a string with non-ASCII bytes in it is then checked to be UTF-8 in one
// more pass, which is quicker than decoding it a character at a time.
func stringEnd(b []byte, i int) (end int, escaped bool, fault stringFault) {
	start := i
	var high uint64 // the high bits of every byte seen
	for {
		var h uint64
		i, h = plainRun(View(b), i)
		high |= h
		if i >= len(b) {
			return i, escaped, faultEnd
		}
		switch ch := b[i]; {
		case ch == '"':
			if high&msbs != 0 && !utf8.Valid(b[start:i]) {
				return start + invalidUTF8(b[start:i]), escaped, faultUTF8
			}
			return i + 1, escaped, noFault
		case ch == '\\':
			escaped = true
			if i+1 < len(b) && simpleEscape[b[i+1]] {
				i += 2
				continue
			}
			if !validEscape(b, i) {
				if i+1 >= len(b) {
					return len(b), escaped, faultEnd
				}
				return i, escaped, faultEscape
			}
			i += 6
		case ch < 0x20:
			return i, escaped, faultControl
		default:
			high |= uint64(ch)
			i++
		}
	}
}

// stringError is the error of a string's fault at i.
func (c *checker) stringError(fault stringFault, i int) error {
	switch fault {
	case faultControl:
		return c.controlError(i)
	case faultEscape:
		return c.escapeError(i)
	case faultUTF8:
		return c.utf8Error(i)
	}
	return c.syntaxError(i)
}

// plainRun returns where the run of string bytes at s[i] that need no
// look (no quote, backslash or control character) ends, as far as words
// reach: the index of the first stop, or of the last bytes of s that do
// not fill a word. It returns the high bits of the bytes it read too;
// bytes past a stop may count in them, which costs at most a needless
// check of valid UTF-8. Sixteen bytes a round, for the long runs of
// prompts.
func plainRun(s string, i int) (int, uint64) {
	var high uint64
	for i+16 <= len(s) {
		w1, w2 := load64(s, i), load64(s, i+8)
		m1, m2 := stringStops(w1), stringStops(w2)
		if m1|m2 != 0 {
			if m1 != 0 {
				return i + bits.TrailingZeros64(m1)>>3, high | w1
			}
			return i + 8 + bits.TrailingZeros64(m2)>>3, high | w1 | w2
		}
		high |= w1 | w2
		i += 16
	}
	for i+8 <= len(s) {
		w := load64(s, i)
		high |= w
		if m := stringStops(w); m != 0 {
			return i + bits.TrailingZeros64(m)>>3, high
		}
		i += 8
	}
	return i, high
}

// simpleEscape is set for the characters after a backslash that make a
// two-byte escape.
var simpleEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// stringStops returns the high bit of each byte of w (eight bytes of a
// string, little-endian) that a string scan must stop at: a quote, a
// backslash or a control character. Bits above the lowest one may be set
// for bytes that are not stops (a borrow runs upwards from a stop); the
// lowest one is always a stop.
func stringStops(w uint64) uint64 {
	q := w ^ (lsbs * '"')
	s := w ^ (lsbs * '\\')
	// Each of the three tests is (x - lsbs*k) &^ x on its own x, but
	// the x's share their high bits (the quote and the backslash have
	// theirs clear), so one &^ w does for all three.
	return ((q - lsbs) | (s - lsbs) | (w - lsbs*0x20)) &^ w & msbs
}

// Constants for looking at the eight bytes of a word at once.
const (
	lsbs = 0x0101010101010101 // the lowest bit of each byte
	msbs = 0x8080808080808080 // the highest bit of each byte
)

// invalidUTF8 returns the offset of the first byte of s that is not
// part of valid UTF-8.
func invalidUTF8(s []byte) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(s)
}

// validEscape reports whether the escape whose backslash is at i, not
// one of the two-byte escapes (see simpleEscape), is a valid \\uXXXX,
// six bytes long. What it stands for matters only in keys (see unquote).
func validEscape(b []byte, i int) bool {
	return i+6 <= len(b) && b[i+1] == 'u' && hex4(b[i+2:i+6]) >= 0
}

// number reads a number at i and returns where it ends (see numberEnd).
func (c *checker) number(i int) (int, error) {
	end, ok := numberEnd(c.body, i)
	if !ok {
		return end, c.syntaxError(end)
	}
	return end, nil
}

// numberEnd reads a number in b at i and returns where it ends; or false,
// and where the fault is. Its value does not matter here: wire formats
// read the numbers they use, and refuse the ones they cannot represent.
func numberEnd(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// literal reads the literal lit at i and returns where it ends.
func (c *checker) literal(i int, lit string) (int, error) {
	b := c.body
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) || b[i+k] != lit[k] {
			return i + k, c.syntaxError(i + k)
		}
	}
	return i + len(lit), nil
}

// skipSpace returns the index of the first byte at or after i that is
// not JSON whitespace. Every byte of whitespace is at most a space, so
// the usual answer, a byte above it, takes one comparison: compact JSON
// has a skipSpace between every two tokens.
func skipSpace(b []byte, i int) int {
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

// The errors of malformed bodies. Their text goes to the client, after
// "Invalid request: ".

func (c *checker) syntaxError(i int) error {
	if i >= len(c.body) {
		return errors.New("request body is not valid JSON: it ends early")
	}
	if ch := c.body[i]; ch >= utf8.RuneSelf {
		return fmt.Errorf("request body is not valid JSON: unexpected byte 0x%02x at offset %d", ch, i)
	}
	return fmt.Errorf("request body is not valid JSON: unexpected %q at offset %d", c.body[i], i)
}

func (c *checker) controlError(i int) error {
	return fmt.Errorf("request body is not valid JSON: control character 0x%02x in a string at offset %d", c.body[i], i)
}

func (c *checker) escapeError(i int) error {
	esc := string(c.body[i:min(i+6, len(c.body))])
	return fmt.Errorf("request body is not valid JSON: invalid escape %q at offset %d", esc, i)
}

func (c *checker) utf8Error(i int) error {
	return fmt.Errorf("request body is not valid UTF-8 at offset %d", i)
}
