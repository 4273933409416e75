package eventstream

import (
	"encoding/binary"
	"fmt"
)

// Header value types of the event stream encoding.
const (
	TypeTrue      = 0
	TypeFalse     = 1
	TypeByte      = 2
	TypeInt16     = 3
	TypeInt32     = 4
	TypeInt64     = 5
	TypeBytes     = 6
	TypeString    = 7
	TypeTimestamp = 8
	TypeUUID      = 9
)

// fixedSize is the value size of each fixed-size type; -1 marks the
// length-prefixed ones.
var fixedSize = [10]int{0, 0, 1, 2, 4, 8, -1, -1, 8, 16}

// next splits the first header off h: its name, type and value bytes.
func next(h []byte) (name []byte, typ byte, value, rest []byte, err error) {
	if len(h) < 2 {
		return nil, 0, nil, nil, fmt.Errorf("%w: truncated header", ErrMalformed)
	}
	nl := int(h[0])
	if nl == 0 || len(h) < 1+nl+1 {
		return nil, 0, nil, nil, fmt.Errorf("%w: bad header name", ErrMalformed)
	}
	name, typ, h = h[1:1+nl], h[1+nl], h[2+nl:]
	if int(typ) >= len(fixedSize) {
		return nil, 0, nil, nil, fmt.Errorf("%w: header type %d", ErrMalformed, typ)
	}
	size := fixedSize[typ]
	if size < 0 {
		if len(h) < 2 {
			return nil, 0, nil, nil, fmt.Errorf("%w: truncated header value", ErrMalformed)
		}
		size = int(binary.BigEndian.Uint16(h))
		h = h[2:]
	}
	if len(h) < size {
		return nil, 0, nil, nil, fmt.Errorf("%w: truncated header value", ErrMalformed)
	}
	return name, typ, h[:size], h[size:], nil
}

// validHeaders checks that h is a sequence of well-formed headers.
func validHeaders(h []byte) error {
	for len(h) > 0 {
		var err error
		if _, _, _, h, err = next(h); err != nil {
			return err
		}
	}
	return nil
}

// Header returns the value of the header called name: the bytes of a
// string or byte-array value, the big-endian bytes of a fixed-size one.
func (m *Message) Header(name string) (value []byte, typ byte, ok bool) {
	h := m.Headers
	for len(h) > 0 {
		n, t, v, rest, err := next(h)
		if err != nil {
			return nil, 0, false
		}
		if string(n) == name {
			return v, t, true
		}
		h = rest
	}
	return nil, 0, false
}

// HeaderIs reports whether the string header called name has the value
// want, without allocating.
func (m *Message) HeaderIs(name, want string) bool {
	v, t, ok := m.Header(name)
	return ok && t == TypeString && string(v) == want
}
