package llm

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/tidwall/gjson"
)

// Shape is what the check of a body learned of its top-level object that
// an edit can use without reading the body again: which of the fields
// declared there the body has, under any of their names, and where the
// object ends. A wire format's parse keeps it in [Request.Shape]; its
// Inject then adds a field the body lacks (stream_options on a streaming
// chat request, the usual edit) just before the closing brace, as
// [SetField] would, without first searching the body for the field's
// names. The zero Shape knows nothing, and an edit with it is SetField's.
type Shape struct {
	// fields are the Fields the body was checked against; nil for the
	// zero Shape.
	fields *Fields
	// seen has the bit of each top-level field the body has.
	seen uint64
	// size is the length of the body described, and brace the index of
	// its closing brace.
	size, brace int
	// members says the object has a member.
	members bool
}

// Shape returns the Shape of the body once Next has returned false and
// Err is nil; otherwise the zero Shape.
func (s *Scan) Shape() Shape {
	if !s.done || s.err != nil || !s.c.object {
		return Shape{}
	}
	// The top level is the first level, which stays as it was when it
	// closed: nothing is pushed after it.
	top := &s.c.levels[0]
	return newShape(s.c.body, top.fields, top.seen)
}

// ShapeOf returns the Shape of body, a body [CheckBody] accepted against
// fields, by reading its top-level keys: for a parse that checked the
// body without a Scan. A body that is not an object has the zero Shape.
func ShapeOf(body []byte, fields *Fields) Shape {
	open := skipSpace(body, 0)
	if fields == nil || open >= len(body) || body[open] != '{' {
		return Shape{}
	}
	var seen uint64
	ForEach(gjson.Parse(View(body[open:])), func(key, _ gjson.Result) bool {
		for _, n := range fields.folds {
			if n.fd.nameIndex(key.Str) >= 0 {
				seen |= n.fd.bit
				break
			}
		}
		return true
	})
	return newShape(body, fields, seen)
}

// newShape returns the Shape of body, a checked object whose top-level
// fields (of fields) are seen.
func newShape(body []byte, fields *Fields, seen uint64) Shape {
	if fields == nil {
		return Shape{}
	}
	open := skipSpace(body, 0)
	return Shape{
		fields:  fields,
		seen:    seen,
		size:    len(body),
		brace:   len(bytes.TrimRight(body, " \t\r\n")) - 1,
		members: body[skipSpace(body, open+1)] != '}',
	}
}

// SetField is [SetFieldIn] for the body sh describes, byte for byte, and
// writes into buf as it does: a top-level field the body lacks is added
// before the closing brace with no further reading of the body, and sh
// then describes the edited body, for a second edit. Any other edit, or
// a body sh does not describe (one of another length, or checked
// against other Fields), is SetFieldIn's, and leaves sh the zero Shape.
//
// sh describes the body it was taken from, and that body after any
// SetField that kept its length: such an edit replaces a value with one
// as long, which moves no key and no brace (a model downgrade's, say),
// while an edit that adds a member makes the body longer.
func (sh *Shape) SetField(buf, body []byte, fields *Fields, value any, path ...string) ([]byte, error) {
	if sh.fields == nil || sh.fields != fields || sh.size != len(body) || body[sh.brace] != '}' || len(path) == 0 {
		*sh = Shape{}
		return SetFieldIn(buf, body, fields, value, path...)
	}
	// The fields on the way, each declared, found once.
	var on [maxEditDepth]*field
	f := fields
	for k, name := range path {
		var d *field
		if k < len(on) {
			d = f.declared(name)
		}
		if d == nil {
			*sh = Shape{}
			return SetFieldIn(buf, body, fields, value, path...)
		}
		on[k], f = d, d.inner
	}
	fd := on[0]
	if sh.seen&fd.bit != 0 {
		*sh = Shape{}
		return SetFieldIn(buf, body, fields, value, path...)
	}
	// The member is "name":{"name":…value}, as appendMember writes it;
	// the value's encoding is appended in place when it is a flag or a
	// count, the values the formats set.
	var room [128]byte
	member := room[:0]
	if sh.members {
		member = append(member, ',')
	}
	for k, d := range on[:len(path)] {
		member = append(appendName(member, d.names[0]), ':')
		if k < len(path)-1 {
			member = append(member, '{')
		}
	}
	switch v := value.(type) {
	case bool:
		member = strconv.AppendBool(member, v)
	case int64:
		member = strconv.AppendInt(member, v, 10)
	case int:
		member = strconv.AppendInt(member, int64(v), 10)
	default:
		enc, err := json.Marshal(value)
		if err != nil {
			*sh = Shape{}
			return SetFieldIn(buf, body, fields, value, path...)
		}
		member = append(member, enc...)
	}
	for range len(path) - 1 {
		member = append(member, '}')
	}
	out := splice(buf, body, sh.brace, sh.brace, member)
	sh.seen |= fd.bit
	sh.size = len(out)
	sh.brace += len(member)
	sh.members = true
	return out, nil
}

// maxEditDepth is how deep a field a Shape's edit adds: deeper ones are
// SetField's.
const maxEditDepth = 4
