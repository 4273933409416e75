package llm

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// CheckTop is CheckBody that also returns the named top-level fields of
// the body, as TopFields(gjson.Parse(View(body)), out, names...) would:
// in the order of names, a missing one as the zero Result. The check
// reads every member anyway, so it notes where the named ones begin and
// end, and the fields cost no further pass over a body whose messages
// can be megabytes. The results are stored in out when it is large
// enough, so that a caller can keep them on its stack.
func CheckTop(body []byte, fields *Fields, out []gjson.Result, names ...string) ([]gjson.Result, error) {
	if len(names) > maxTopNames {
		if err := checkApart(body, fields); err != nil {
			return nil, err
		}
		return TopFields(gjson.Parse(View(body)), out, names...), nil
	}
	if cap(out) < len(names) {
		out = make([]gjson.Result, len(names))
	}
	out = out[:len(names)]
	clear(out)
	// Set field by field: a composite literal would be built in a
	// temporary and copied, doubling the frame.
	var c checker
	c.body = body
	c.capture.on, c.capture.current = true, -1
	c.capture.n = copy(c.capture.names[:], names)
	if err := c.checkBody(fields); err != nil {
		return nil, err
	}
	s := View(body)
	for k := range names {
		if sp := c.capture.spans[k]; sp.end > sp.start {
			out[k] = topValue(s[sp.start:sp.end], sp.start)
		}
	}
	return out, nil
}

// checkApart is CheckBody out of line: inlined into CheckTop, its
// checker would take a second checker's room in CheckTop's frame, on
// every request's stack.
//
//go:noinline
func checkApart(body []byte, fields *Fields) error { return CheckBody(body, fields) }

// maxTopNames is how many names CheckTop captures in the checker, which
// stays on the stack.
const maxTopNames = 16

// topCapture is where a checker notes the top-level members CheckTop
// asks for.
type topCapture struct {
	on bool
	// names are copied here, rather than sliced, so that the caller's
	// slice stays on its stack: the checker's contents are taken to
	// escape.
	names [maxTopNames]string
	n     int
	spans [maxTopNames]topSpan // parallel to names; end is 0 until captured
	// current is the index in names of the member being read, or -1.
	current int
}

// topSpan is where a member's value starts and ends in the body.
type topSpan struct{ start, end int }

// valueStarts notes that the value of the top-level member key starts at
// i.
func (t *topCapture) valueStarts(key []byte, i int) {
	t.current = -1
	for k, n := range t.names[:t.n] {
		if string(key) == n && t.spans[k].end == 0 {
			t.current = k
			t.spans[k].start = i
			return
		}
	}
}

// valueEnds notes that the value of the top-level member being read, if
// it is one of the names, ends at i.
func (t *topCapture) valueEnds(i int) {
	if t.current >= 0 {
		t.spans[t.current].end = i
		t.current = -1
	}
}

// topValue returns the checked value raw, at index in the body, as gjson
// reads it.
func topValue(raw string, index int) gjson.Result {
	r := gjson.Result{Raw: raw, Index: index}
	switch raw[0] {
	case '"':
		r.Type, r.Str = gjson.String, stringValue(raw, strings.IndexByte(raw, '\\') >= 0)
	case '{', '[':
		r.Type = gjson.JSON
	case 't':
		r.Type = gjson.True
	case 'f':
		r.Type = gjson.False
	case 'n':
		r.Type = gjson.Null
	default:
		r.Type = gjson.Number
		r.Num, _ = strconv.ParseFloat(raw, 64)
	}
	return r
}
