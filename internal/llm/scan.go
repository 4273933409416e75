package llm

import (
	"errors"
	"hash/maphash"
	"math"

	"github.com/tidwall/gjson"
)

// Scan checks a request body as [CheckTop] does, in the same one pass,
// and stops in that pass after each object or array whose [Fields] are
// visited ([Fields.Visit]): a wire format reads what it needs of each
// message as the check closes it, instead of walking the messages again
// once the check is done. Its verdict is CheckBody's, whatever the
// format does at the stops, and so are the top-level fields it returns.
//
// A Scan is used as
//
//	var s llm.Scan
//	s.Start(body, fields, "model", "messages")
//	for s.Next() {
//		// s.Visited() is the object or array that just closed;
//		// s.Member reads the fields of an object.
//	}
//	if err := s.Err(); err != nil { … }
//	model := s.Top(0)
//
// What a stop shows is valid until the next call of Next. The body has
// been checked only as far as a stop: a format must not act on what it
// read there before Err says the whole body is good. A Scan is large
// (the checker's state) and meant to live on its caller's stack.
type Scan struct {
	c    checker
	err  error
	done bool
}

// maxVisited is how many fields visited Fields may have: a visited
// object notes where each of them is.
const maxVisited = 16

// visitFrame notes where the fields of an open visited object are.
type visitFrame struct {
	// spans are where the fields' values are, by slot; a field's span is
	// valid once its bit is in the level's seen set and the value has
	// ended.
	spans [maxVisited]struct{ start, end uint32 }
	// escaped has the bit of each slot whose value is a string with an
	// escape in it.
	escaped uint32
}

// closedLevel is what the checker tells of the visited level it stopped
// after.
type closedLevel struct {
	Visited
	seen  uint64
	frame int32
}

// Visited describes the object or array a [Scan] stopped after.
type Visited struct {
	// Fields are the Fields that describe it (those of its elements, for
	// an array).
	Fields *Fields
	// Depth is how deeply it is nested: 1 for the body itself, 2 for a
	// value of one of its fields.
	Depth int
	Array bool
	// Elements is how many elements an array has.
	Elements int
	// Start and End are where it is in the body.
	Start, End int
}

// Start readies s to check body against fields, and to return the named
// top-level fields from the check (at most 16 names).
func (s *Scan) Start(body []byte, fields *Fields, names ...string) {
	*s = Scan{c: checker{body: body}}
	if len(names) > maxTopNames {
		s.done, s.err = true, errors.New("llm.Scan: too many top-level names")
		return
	}
	if uint64(len(body)) >= math.MaxUint32 {
		// Key offsets are kept in 32 bits.
		s.done, s.err = true, errors.New("request body is too large")
		return
	}
	c := &s.c
	c.capture = topCapture{on: true, current: -1}
	c.capture.n = copy(c.capture.names[:], names)
	c.visiting = true
	c.seed = maphash.MakeSeed()
	if err := c.begin(fields); err != nil {
		s.done, s.err = true, err
	}
}

// Next reads on to the next visited object or array, and reports whether
// it found one; false means the body has been read, or refused (see
// Err).
func (s *Scan) Next() bool {
	if s.done {
		return false
	}
	stopped, err := s.c.run()
	if stopped {
		return true
	}
	s.done, s.err = true, err
	return false
}

// Err returns the check's verdict once Next has returned false: nil for a
// body CheckBody accepts, else CheckBody's error.
func (s *Scan) Err() error { return s.err }

// Visited returns the object or array Next stopped after.
func (s *Scan) Visited() *Visited { return &s.c.closed.Visited }

// Value is a value a [Scan] has checked: its JSON text, where that is in
// the body, and, for a string, whether it has an escape in it.
type Value struct {
	Raw     string
	Index   int
	Escaped bool
}

// Text returns what the string v holds, as gjson reads it (Result.Str);
// v must be a string.
func (v Value) Text() string { return stringValue(v.Raw, v.Escaped) }

// Member returns the value of the field in slot ([Fields.Slot]) of the
// object Next stopped after; false when the object lacks the field.
func (s *Scan) Member(slot int) (Value, bool) {
	// Only a visited object has seen fields, and a frame.
	if s.c.closed.seen&(1<<slot) == 0 {
		return Value{}, false
	}
	return s.member(slot), true
}

// Members returns the set of fields the object Next stopped after has:
// the bit 1<<slot of each, by [Fields.Slot]. A format that reads a few
// of many fields tests them at once, and calls Member for those
// present.
func (s *Scan) Members() uint64 { return s.c.closed.seen }

// member is Member's reading of a present field, kept apart so that
// Member, whose answer is often "absent", is inlined.
//
//go:noinline
func (s *Scan) member(slot int) Value {
	f := s.c.frame(int(s.c.closed.frame))
	sp := f.spans[slot]
	return Value{Raw: View(s.c.body[sp.start:sp.end]), Index: int(sp.start), Escaped: f.escaped&(1<<slot) != 0}
}

// Top returns the top-level field names[k], as CheckTop does, once the
// check has read it; until then, and when the body has none, the zero
// Result.
func (s *Scan) Top(k int) gjson.Result {
	c := &s.c
	if k >= c.capture.n {
		return gjson.Result{}
	}
	sp := c.capture.spans[k]
	if sp.end <= sp.start {
		return gjson.Result{}
	}
	return topValue(View(c.body[sp.start:sp.end]), sp.start)
}

// pushFrame opens a visitFrame and returns its index.
func (c *checker) pushFrame() int {
	k := c.nframes
	if k >= inlineFrames {
		if k-inlineFrames < len(c.moreFrames) {
			c.moreFrames[k-inlineFrames] = visitFrame{}
		} else {
			c.moreFrames = append(c.moreFrames, visitFrame{})
		}
	} else {
		c.frames[k].escaped = 0
	}
	c.nframes++
	return k
}

// frame returns visitFrame k.
func (c *checker) frame(k int) *visitFrame {
	if k < inlineFrames {
		return &c.frames[k]
	}
	return &c.moreFrames[k-inlineFrames]
}

// memberStarts notes that the value of the field fd of the visited object
// top starts at i.
func (c *checker) memberStarts(top *level, fd *field, i int) {
	c.frame(int(top.frame)).spans[fd.slot].start = uint32(i)
	top.member = int32(fd.slot)
}

// memberEnds notes that the value of the member of top being read ends
// at i.
func (c *checker) memberEnds(top *level, i int) {
	f := c.frame(int(top.frame))
	m := top.member
	f.spans[m].end = uint32(i)
	if c.escaped {
		// The frame's bits start clear, and each field is read once.
		f.escaped |= 1 << m
	}
	top.member = -1
}

// close closes the innermost level, which ends just before end, and
// reports whether a Scan stops there: when the level is visited, which
// c.closed then describes. empty says it closed with no element or
// member.
func (c *checker) close(end int, empty bool) bool {
	top := c.top()
	if !top.visit {
		c.pop()
		return false
	}
	elements := 0
	if top.array && !empty {
		elements = top.element + 1
	}
	c.closed = closedLevel{
		Visited: Visited{Fields: top.fields, Depth: c.depth, Array: top.array, Elements: elements, Start: top.start, End: end},
		seen:    top.seen,
		frame:   top.frame,
	}
	c.pop()
	return true
}
