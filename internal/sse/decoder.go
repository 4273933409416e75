package sse

import "bytes"

const (
	// DefaultMaxEventBytes is the data bound used when Options.MaxEventBytes <= 0. Usage
	// chunks are small, but an OpenAI response.completed repeats the whole output before
	// its usage, so the bound must hold a long answer; it must also stay small enough
	// that thousands of concurrent streams cannot exhaust memory.
	DefaultMaxEventBytes = 1 << 20

	// MaxKeptBytes bounds the data buffer a Decoder keeps between events. A larger
	// event is still read whole, up to MaxEventBytes, but the buffer that held it is
	// dropped once it is dispatched, so that a stream holds only a small buffer while
	// it waits for its next event, however large an earlier one was.
	MaxKeptBytes = 16 << 10

	// MaxFieldBytes bounds the kept bytes of an event type and of an event ID. Longer
	// values are truncated: no API names its events with more than a few dozen bytes, and
	// the bound stops a hostile upstream from growing memory through these fields.
	MaxFieldBytes = 1 << 10
)

// Options configure a Decoder. The zero value is the default.
type Options struct {
	// MaxEventBytes bounds the bytes of one event's data kept in memory (default 1 MiB when <= 0).
	// Data beyond the bound is counted, not kept, and the event is marked Truncated.
	MaxEventBytes int
}

// Event is one dispatched event. Its slices are only valid during the callback: they
// alias the decoder's buffers (or the bytes passed to Write), which is what keeps the
// decoder allocation-free. Copy what must outlive the callback.
type Event struct {
	Type      []byte // the "event:" field, empty when absent (meaning "message")
	Data      []byte // data lines joined with "\n" (up to MaxEventBytes)
	ID        []byte // the last event ID; like EventSource's, it persists across events until an "id:" line changes it
	DataLen   int    // full length of the data, also when Truncated
	Truncated bool   // DataLen > len(Data): the data exceeded MaxEventBytes
}

// state is where the decoder stands inside the current line. A line may span any number
// of Writes, so the position has to survive between them.
type state uint8

const (
	stLineStart  state = iota // nothing of the line seen yet
	stName                    // inside the field name; the part seen so far is in Decoder.name
	stValueStart              // right after the colon: one leading space is still to drop
	stValue                   // inside the value of Decoder.field
	stSkip                    // comment or unknown field: ignore up to the end of the line
)

// field names the fields the decoder keeps; the rest (retry included) are skipped.
type field uint8

const (
	fieldOther field = iota
	fieldData
	fieldEvent
	fieldID
)

// maxNameLen is the length of the longest field name the decoder keeps ("event"): a name
// split across Writes is held only until it is known to be longer, and so unknown.
const maxNameLen = 5

var (
	bom     = [3]byte{0xEF, 0xBB, 0xBF}
	newline = []byte{'\n'}
)

// Decoder is an incremental text/event-stream decoder for one stream at a time. It holds
// at most MaxEventBytes of data plus a few KiB, however the stream is split or whatever
// it contains. A Decoder is not safe for concurrent use. The zero Decoder is ready to use
// with the default Options.
type Decoder struct {
	maxData int

	state   state
	field   field // the field whose value is being read, in stValueStart and stValue
	afterCR bool  // the previous Write ended in a CR: an LF that starts the next one belongs to it
	bomDone bool  // past the point where a BOM may be stripped
	bomLen  int   // bytes of a leading BOM matched so far, held until the BOM is complete or refuted

	name    [maxNameLen]byte
	nameLen int // > maxNameLen once the name is longer than any kept field's

	// The event's data is data, or ref while the event's only data bytes lie in the
	// slice passed to the current Write: dispatching straight from the caller's bytes
	// saves a copy per event. ref never outlives the Write (see own).
	data    []byte
	ref     []byte
	dataLen int
	hasData bool // a data field was seen: WHATWG dispatches an event with data "" but not one without data

	typ    []byte
	id     []byte
	idNext []byte // the value of the id line being read, committed at its end unless it contains NUL
	idNUL  bool
}

// NewDecoder returns a decoder configured by opts.
func NewDecoder(opts Options) *Decoder {
	d := &Decoder{maxData: opts.MaxEventBytes}
	if d.maxData <= 0 {
		d.maxData = DefaultMaxEventBytes
	}
	return d
}

// Write feeds the next bytes of the stream and calls fn for each event completed by them, in order.
// It never fails: malformed input is handled per the WHATWG rules. It must not retain p.
// fn may be nil to only advance the stream; fn must not call methods of d other than Buffered.
func (d *Decoder) Write(p []byte, fn func(Event)) {
	if d.maxData <= 0 {
		d.maxData = DefaultMaxEventBytes
	}
	if !d.bomDone {
		p = d.skipBOM(p, fn)
	}
	d.feed(p, fn)
	if d.ref != nil {
		d.own()
	}
}

// Reset makes the decoder ready for a new stream, keeping its buffers.
// That lets one decoder (or a pool of them) serve stream after stream without allocating.
func (d *Decoder) Reset() {
	*d = Decoder{
		maxData: d.maxData,
		data:    d.data[:0],
		typ:     d.typ[:0],
		id:      d.id[:0],
		idNext:  d.idNext[:0],
	}
}

// Buffered reports how many bytes the decoder currently holds (for memory-bound tests and metrics).
// It counts the pending event's kept data, type and ID, the last event ID, and the few
// bytes of a field name or BOM that a Write boundary cut. The buffers' capacities are
// bounded the same way: they never grow past MaxEventBytes, or MaxFieldBytes for the
// type and ID.
func (d *Decoder) Buffered() int {
	return len(d.data) + len(d.ref) + len(d.typ) + len(d.id) + len(d.idNext) +
		min(d.nameLen, maxNameLen) + d.bomLen
}

// skipBOM strips a UTF-8 BOM at the start of the stream, which may arrive split across
// Writes. Bytes that turn out not to be a BOM are fed as ordinary input.
func (d *Decoder) skipBOM(p []byte, fn func(Event)) []byte {
	for len(p) > 0 {
		if p[0] != bom[d.bomLen] {
			held := d.bomLen
			d.bomDone, d.bomLen = true, 0
			d.feed(bom[:held], fn)
			return p
		}
		p = p[1:]
		d.bomLen++
		if d.bomLen == len(bom) {
			d.bomDone, d.bomLen = true, 0
			return p
		}
	}
	return p
}

// feed splits p into line pieces. The next CR and LF positions are found with
// bytes.IndexByte and remembered until passed, so each byte is scanned at most once per
// terminator kind even when a stream uses lone CRs and the LF search finds nothing.
func (d *Decoder) feed(p []byte, fn func(Event)) {
	if len(p) == 0 {
		return
	}
	pos := 0
	if d.afterCR {
		d.afterCR = false
		if p[0] == '\n' {
			pos = 1
		}
	}
	nextLF, nextCR := -1, -1
	for pos < len(p) {
		if nextLF < pos {
			nextLF = indexFrom(p, pos, '\n')
		}
		if nextCR < pos {
			nextCR = indexFrom(p, pos, '\r')
		}
		end := min(nextLF, nextCR)
		if d.state == stLineStart && !d.hasData && len(p)-end > 1 && p[end] == '\n' && p[end+1] == '\n' && d.dataEvent(p[pos:end], fn) {
			pos = end + 2
			continue
		}
		d.consume(p[pos:end])
		if end == len(p) {
			return
		}
		d.endLine(fn)
		pos = end + 1
		if p[end] == '\r' {
			if pos == len(p) {
				d.afterCR = true
				return
			}
			if p[pos] == '\n' {
				pos++
			}
		}
	}
}

// dataEvent is feed's fast path for the commonest event of all, a single
// data line that ends in LF with the blank line right after it, wholly
// inside one Write ("data: {...}\n\n", as OpenAI and Gemini send every
// event): it dispatches the event straight from line, the data line
// without its terminator, as the line-by-line path would, and reports
// false, having done nothing, for any other line. The caller has checked
// that the decoder is at the start of a line with no data pending, and
// that line is followed by "\n\n".
func (d *Decoder) dataEvent(line []byte, fn func(Event)) bool {
	if len(line) < len("data:") || string(line[:len("data:")]) != "data:" {
		return false
	}
	v := line[len("data:"):]
	if len(v) > 0 && v[0] == ' ' {
		v = v[1:]
	}
	if len(v) > d.maxData {
		return false
	}
	if fn != nil {
		d.ref = v // for Buffered, during the callback
		fn(Event{Type: d.typ, Data: v, ID: d.id, DataLen: len(v)})
		d.ref = nil
	}
	d.typ = d.typ[:0]
	return true
}

// indexFrom returns the index of the first c in p at or after from, or len(p).
func indexFrom(p []byte, from int, c byte) int {
	if i := bytes.IndexByte(p[from:], c); i >= 0 {
		return from + i
	}
	return len(p)
}

// consume takes the next piece of the current line, without its terminator. Within one
// Write a line arrives in one piece, so the common case finds the colon and the value in
// seg itself and copies nothing but the data.
func (d *Decoder) consume(seg []byte) {
	switch d.state {
	case stLineStart:
		if len(seg) == 0 {
			return
		}
		if seg[0] == ':' {
			d.state = stSkip
			return
		}
		d.state = stName
		fallthrough
	case stName:
		colon := bytes.IndexByte(seg, ':')
		if colon < 0 {
			d.addName(seg)
			return
		}
		var f field
		if d.nameLen == 0 {
			f = lookup(seg[:colon])
		} else {
			d.addName(seg[:colon])
			f = d.heldField()
		}
		if !d.beginField(f) {
			d.state = stSkip
			return
		}
		d.state = stValueStart
		seg = seg[colon+1:]
		fallthrough
	case stValueStart:
		if len(seg) == 0 {
			return
		}
		if seg[0] == ' ' {
			seg = seg[1:]
		}
		d.state = stValue
		fallthrough
	case stValue:
		d.appendValue(seg)
	}
}

// endLine acts on a line terminator.
func (d *Decoder) endLine(fn func(Event)) {
	switch d.state {
	case stLineStart:
		d.dispatch(fn)
	case stName:
		// A line without a colon is a field name with an empty value.
		if d.beginField(d.heldField()) {
			d.endField()
		}
	case stValueStart, stValue:
		d.endField()
	}
	d.state = stLineStart
}

func (d *Decoder) addName(b []byte) {
	if d.nameLen+len(b) > maxNameLen {
		d.nameLen = maxNameLen + 1
		return
	}
	d.nameLen += copy(d.name[d.nameLen:], b)
}

// heldField resolves the name held in d.name and clears it.
func (d *Decoder) heldField() field {
	f := fieldOther
	if d.nameLen <= maxNameLen {
		f = lookup(d.name[:d.nameLen])
	}
	d.nameLen = 0
	return f
}

// lookup maps a field name to the field it names. Names are case-sensitive.
func lookup(name []byte) field {
	switch string(name) {
	case "data":
		return fieldData
	case "event":
		return fieldEvent
	case "id":
		return fieldID
	}
	return fieldOther
}

// beginField starts the value of f and reports whether f is kept.
func (d *Decoder) beginField(f field) bool {
	d.field = f
	switch f {
	case fieldData:
		// Joining with "\n" before every line but the first gives WHATWG's result (append
		// value and LF, drop the final LF at dispatch) without a byte to take back.
		if d.hasData {
			d.appendData(newline)
		}
		d.hasData = true
	case fieldEvent:
		d.typ = d.typ[:0]
	case fieldID:
		d.idNext = d.idNext[:0]
		d.idNUL = false
	default:
		return false
	}
	return true
}

func (d *Decoder) appendValue(b []byte) {
	if len(b) == 0 {
		return
	}
	switch d.field {
	case fieldData:
		d.appendData(b)
	case fieldEvent:
		d.typ = appendField(d.typ, b)
	case fieldID:
		// The whole value is checked, not just the kept part: WHATWG ignores an id with a
		// NUL anywhere in it.
		if bytes.IndexByte(b, 0) >= 0 {
			d.idNUL = true
		}
		d.idNext = appendField(d.idNext, b)
	}
}

func (d *Decoder) endField() {
	if d.field == fieldID && !d.idNUL {
		d.id, d.idNext = d.idNext, d.id[:0]
	}
}

// appendData adds b to the event's data, keeping at most maxData bytes and counting all.
func (d *Decoder) appendData(b []byte) {
	d.dataLen += len(b)
	kept := len(d.data) + len(d.ref)
	if room := d.maxData - kept; len(b) > room {
		b = b[:room]
	}
	if len(b) == 0 {
		return
	}
	if kept == 0 {
		d.ref = b
		return
	}
	if d.ref != nil {
		d.own()
	}
	d.data = appendCapped(d.data, b, d.maxData)
}

// own copies the data that ref points to into the decoder's buffer, so that nothing of
// the caller's slice is retained after Write.
func (d *Decoder) own() {
	d.data = appendCapped(d.data[:0], d.ref, d.maxData)
	d.ref = nil
}

func (d *Decoder) dispatch(fn func(Event)) {
	if d.hasData && fn != nil {
		data := d.data
		if d.ref != nil {
			data = d.ref
		}
		fn(Event{Type: d.typ, Data: data, ID: d.id, DataLen: d.dataLen, Truncated: d.dataLen > len(data)})
	}
	// WHATWG resets the data and type buffers whether or not it dispatched; the last
	// event ID stays.
	d.data, d.ref, d.dataLen, d.hasData = d.data[:0], nil, 0, false
	d.typ = d.typ[:0]
	if cap(d.data) > MaxKeptBytes {
		// Grown for one large event: not kept for the rest of the stream.
		d.data = nil
	}
}

// appendField appends b to a type or ID buffer, truncating at MaxFieldBytes.
func appendField(buf, b []byte) []byte {
	if room := MaxFieldBytes - len(buf); len(b) > room {
		b = b[:room]
	}
	if len(b) == 0 {
		return buf
	}
	return appendCapped(buf, b, MaxFieldBytes)
}

// appendCapped appends b to buf, growing it like append would but never to a capacity
// above limit, so that the memory bound holds for capacity and not only for length.
// The caller guarantees len(buf)+len(b) <= limit.
func appendCapped(buf, b []byte, limit int) []byte {
	if n := len(buf) + len(b); n > cap(buf) {
		c := min(max(2*cap(buf), n, 256), limit)
		nb := make([]byte, len(buf), c)
		copy(nb, buf)
		buf = nb
	}
	return append(buf, b...)
}
