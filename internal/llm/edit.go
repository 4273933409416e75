package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// SetField returns a copy of body, a body [CheckBody] accepted against
// fields, with the field at path set to value (encoded by encoding/json).
// path names fields as fields declares them, outermost first.
//
// The body has each field once (CheckBody saw to it), and that occurrence
// is the one edited, under whichever name the body gives it: an alias, or
// a key spelled with escapes. A field the body lacks is added at the end
// of its object, just before the closing brace, with the objects on its
// way, under the name of the same rank as its parent's (Gemini's
// max_output_tokens inside generation_config). A null on the way is
// replaced by an object; any other value there that is not an object is
// an error, which ParseRequest, refusing such a body, prevents. The rest
// of the body is kept byte for byte, as [API.Inject] promises.
func SetField(body []byte, fields *Fields, value any, path ...string) ([]byte, error) {
	return SetFieldIn(nil, body, fields, value, path...)
}

// SetFieldIn is [SetField] writing the edited body into buf, from its
// start, when buf's capacity holds it (see [InjectOptions.Buf]); buf may
// hold body itself, an earlier edit's, which is then edited in place.
// Otherwise the edited body is a new slice.
func SetFieldIn(buf, body []byte, fields *Fields, value any, path ...string) ([]byte, error) {
	enc, err := encodeValue(value)
	if err != nil {
		return nil, fmt.Errorf("editing request body: %w", err)
	}
	if len(path) == 0 {
		return nil, fmt.Errorf("editing request body: no field named")
	}
	off := skipSpace(body, 0)
	if off >= len(body) || body[off] != '{' {
		return nil, fmt.Errorf("editing request body: %w", ErrNotObject)
	}
	obj := gjson.Parse(View(body[off:]))
	// Each field on the way must be declared, so that the edit knows its
	// names.
	f := fields
	for _, name := range path {
		fd := f.declared(name)
		if fd == nil {
			return nil, fmt.Errorf("editing request body: field %q is not declared", name)
		}
		f = fd.inner
	}
	if fields.declared(path[0]).absentFrom(body) {
		// The member goes just before the body's closing brace, with
		// the objects on its way, as the walk below would put it.
		var member []byte
		if first := skipSpace(body, off+1); first < len(body) && body[first] != '}' {
			member = append(member, ',')
		}
		member = appendMember(member, fields, path, 0, enc)
		brace := len(bytes.TrimRight(body, " \t\r\n")) - 1
		return splice(buf, body, brace, brace, member), nil
	}
	rank := 0 // the rank among its names of the name the parent has
	for k := 0; ; k++ {
		name := path[k]
		fd := fields.declared(name)
		var found gjson.Result
		at, foundRank, members := -1, 0, false
		// The body was checked: ForEach reads it without checking it
		// again, a long prompt a word at a time.
		ForEach(obj, func(key, v gjson.Result) bool {
			members = true
			if r := fd.nameIndex(key.Str); r >= 0 {
				found, at, foundRank = v, off+v.Index, r
				return false
			}
			return true
		})
		switch {
		case at < 0:
			// The member goes just before the object's closing brace.
			var member []byte
			if members {
				member = append(member, ',')
			}
			member = appendMember(member, fields, path[k:], rank, enc)
			brace := off + len(strings.TrimRight(obj.Raw, " \t\r\n")) - 1
			return splice(buf, body, brace, brace, member), nil
		case k == len(path)-1:
			return splice(buf, body, at, at+len(found.Raw), enc), nil
		case found.Type == gjson.Null:
			inner := append([]byte{'{'}, appendMember(nil, fd.inner, path[k+1:], foundRank, enc)...)
			return splice(buf, body, at, at+len(found.Raw), append(inner, '}')), nil
		case !found.IsObject():
			return nil, fmt.Errorf("editing request body: %s is not an object", name)
		}
		obj, off, fields, rank = gjson.Parse(found.Raw), at, fd.inner, foundRank
	}
}

// absentFrom reports, without reading body as JSON, that no key of it
// is one of the field's names: none of the names, each a plain word, is
// in its bytes, and it has no \u escape. A key spells a plain word only
// with the word's own bytes or with \u escapes, the other escapes
// standing for characters no plain word has. A body that names the
// field anywhere, or has a \u escape anywhere, is not known to lack it.
func (fd *field) absentFrom(body []byte) bool {
	s := View(body)
	if strings.IndexByte(s, '\\') >= 0 && strings.Contains(s, `\u`) {
		return false
	}
	for _, n := range fd.names {
		if !plainKey([]byte(n)) || strings.Contains(s, n) {
			return false
		}
	}
	return true
}

// appendMember appends "name":value for the field path[0] of fields,
// value being the objects down path with enc at the end. Each name is
// the one of the given rank, or the field's last one.
func appendMember(out []byte, fields *Fields, path []string, rank int, enc []byte) []byte {
	fd := fields.declared(path[0])
	out = appendName(out, fd.names[min(rank, len(fd.names)-1)])
	out = append(out, ':')
	if len(path) == 1 {
		return append(out, enc...)
	}
	out = append(out, '{')
	return append(appendMember(out, fd.inner, path[1:], rank, enc), '}')
}

// encodeValue encodes value as encoding/json does: the flags and counts
// the formats set directly, anything else through encoding/json.
func encodeValue(value any) ([]byte, error) {
	switch v := value.(type) {
	case bool:
		return strconv.AppendBool(nil, v), nil
	case int64:
		return strconv.AppendInt(nil, v, 10), nil
	case int:
		return strconv.AppendInt(nil, int64(v), 10), nil
	}
	return json.Marshal(value)
}

// appendName appends the field name, quoted as encoding/json quotes it:
// a plain word as it is, anything else through encoding/json.
func appendName(out []byte, name string) []byte {
	if plainKey([]byte(name)) {
		return append(append(append(out, '"'), name...), '"')
	}
	enc, _ := json.Marshal(name)
	return append(out, enc...)
}

// splice returns body with body[from:to] replaced by insert, written
// into buf when its capacity holds it, else into a new slice. buf may
// begin where body does (the output of an earlier edit into buf): the
// bytes after to then move in place. insert must not overlap buf.
func splice(buf, body []byte, from, to int, insert []byte) []byte {
	n := len(body) - (to - from) + len(insert)
	switch {
	case cap(buf) < n || overlaps(buf[:cap(buf)], body) && !sameStart(buf, body):
		buf = make([]byte, n)
	case sameStart(buf, body):
		// In place: the tail first, then what goes before it.
		buf = buf[:n]
		copy(buf[from+len(insert):], body[to:])
		copy(buf[from:], insert)
		return buf
	default:
		buf = buf[:n]
	}
	copy(buf, body[:from])
	copy(buf[from:], insert)
	copy(buf[from+len(insert):], body[to:])
	return buf
}

// sameStart reports whether a and b, neither empty, begin at the same
// byte.
func sameStart(a, b []byte) bool {
	return cap(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// overlaps reports whether a and b share a byte.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
