package llm

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// tailSize is how much of an oversized body a Capture keeps: providers put
// usage at the end of a JSON response, well within its last 64 KiB.
const tailSize = 64 << 10

// Capture keeps a non-streamed JSON response body so its usage can be read
// once the body is complete. Memory is bounded: past max bytes it keeps
// only the last 64 KiB, where the usage object sits.
type Capture struct {
	max      int
	buf      []byte
	overflow bool
	total    int64
}

// NewCapture returns a Capture that keeps at most max bytes whole (zero
// means DefaultMaxBuffer).
func NewCapture(max int) Capture {
	if max <= 0 {
		max = DefaultMaxBuffer
	}
	return Capture{max: max}
}

// Write appends the next bytes of the body.
func (c *Capture) Write(p []byte) {
	c.total += int64(len(p))
	if !c.overflow && len(c.buf)+len(p) <= c.max {
		c.buf = append(c.buf, p...)
		return
	}
	c.overflow = true
	if len(p) >= tailSize {
		c.buf = append(c.buf[:0], p[len(p)-tailSize:]...)
		return
	}
	if keep := tailSize - len(p); len(c.buf) > keep {
		c.buf = append(c.buf[:0], c.buf[len(c.buf)-keep:]...)
	}
	c.buf = append(c.buf, p...)
}

// Len is the number of body bytes written so far.
func (c *Capture) Len() int64 { return c.total }

// Get returns the top-level field key of the body. For an oversized body
// it looks for the last occurrence of the key in the kept tail.
func (c *Capture) Get(key string) gjson.Result {
	if !c.overflow {
		return gjson.Get(View(c.buf), key)
	}
	quoted := make([]byte, 0, len(key)+2)
	quoted = append(append(append(quoted, '"'), key...), '"')
	i := bytes.LastIndex(c.buf, quoted)
	if i < 0 {
		return gjson.Result{}
	}
	rest := c.buf[i+len(quoted):]
	j := bytes.IndexByte(rest, ':')
	if j < 0 {
		return gjson.Result{}
	}
	return gjson.Parse(View(rest[j+1:]))
}

// Whole returns the body parsed, from its first '{' or '[', and reports
// false, with nothing, for a body too large to keep whole.
func (c *Capture) Whole() (gjson.Result, bool) {
	if c.overflow {
		return gjson.Result{}, false
	}
	return gjson.Parse(View(c.json())), true
}

// json is the kept body from its first '{' or '[': bytes before it, such
// as a byte order mark, are not JSON.
func (c *Capture) json() []byte {
	if i := bytes.IndexAny(c.buf, "{["); i > 0 {
		return c.buf[i:]
	}
	return c.buf
}

// GetOnce is Get, and reports false when the body holds the top-level
// field more than once (see UniqueMember). Of an oversized body only the
// tail is kept, in which Get finds the last. Like Get, it reads the body
// from its first '{' or '[': bytes before it, such as a byte order mark,
// do not hide the usage.
func (c *Capture) GetOnce(key string) (gjson.Result, bool) {
	if c.overflow {
		return c.Get(key), true
	}
	return UniqueMember(gjson.Parse(View(c.json())), key)
}
