package eventstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

const (
	// DefaultMaxMessageBytes is the largest frame accepted by default: the
	// event stream protocol's own limit.
	DefaultMaxMessageBytes = 16 << 20
	// DefaultMaxPayloadBytes bounds the payload bytes kept by default.
	DefaultMaxPayloadBytes = 1 << 20
	// MaxHeadersBytes is the protocol's limit on a message's headers.
	MaxHeadersBytes = 128 << 10

	preludeLen = 12
	crcLen     = 4
	minMessage = preludeLen + crcLen
)

// Errors that stop a Decoder. They are wrapped with detail.
var (
	ErrTooLarge  = errors.New("eventstream: message too large")
	ErrCRC       = errors.New("eventstream: checksum mismatch")
	ErrMalformed = errors.New("eventstream: malformed message")
)

// Options configure a Decoder; the zero value is the default.
type Options struct {
	// MaxMessageBytes bounds a frame's total length (default 16 MiB).
	MaxMessageBytes int
	// MaxPayloadBytes bounds the payload bytes kept per message (default
	// 1 MiB); the rest is checksummed and counted in PayloadLen.
	MaxPayloadBytes int
}

// Message is one decoded message. Its slices alias the decoder's buffers
// and are valid only during the callback.
type Message struct {
	// Headers are the raw header bytes, already validated: read them with
	// Header.
	Headers []byte
	// Payload is the payload, up to MaxPayloadBytes.
	Payload []byte
	// PayloadLen is the full payload length, also when Truncated.
	PayloadLen int
	Truncated  bool
}

type state uint8

const (
	stPrelude state = iota
	stHeaders
	stPayload
	stCRC
	stError
)

// Decoder decodes one event stream. It is not safe for concurrent use.
type Decoder struct {
	maxMessage int
	maxPayload int

	state   state
	prelude [preludeLen]byte
	crcBuf  [crcLen]byte
	n       int // bytes of the current part (prelude, headers, payload, crc) seen

	total, hlen int
	crc         uint32 // running CRC of the message so far
	headers     []byte
	payload     []byte
	payloadLen  int
	err         error
	msg         Message // handed to the callback; a field so it is not allocated per message
}

// NewDecoder returns a decoder configured by opts.
func NewDecoder(opts Options) *Decoder {
	d := &Decoder{maxMessage: opts.MaxMessageBytes, maxPayload: opts.MaxPayloadBytes}
	if d.maxMessage <= 0 {
		d.maxMessage = DefaultMaxMessageBytes
	}
	if d.maxPayload <= 0 {
		d.maxPayload = DefaultMaxPayloadBytes
	}
	return d
}

// Err returns the error that stopped the decoder, or nil.
func (d *Decoder) Err() error { return d.err }

// Buffered reports the bytes the decoder holds (for memory-bound tests).
func (d *Decoder) Buffered() int { return cap(d.headers) + cap(d.payload) }

// Write feeds the next bytes of the stream and calls fn for each message
// they complete, in order. It does not retain p. After an error it ignores
// its input and returns the error.
func (d *Decoder) Write(p []byte, fn func(*Message)) error {
	for len(p) > 0 && d.state != stError {
		switch d.state {
		case stPrelude:
			k := copy(d.prelude[d.n:], p)
			d.n += k
			p = p[k:]
			if d.n == preludeLen {
				d.startMessage()
			}
		case stHeaders:
			k := min(len(p), d.hlen-len(d.headers))
			d.headers = append(d.headers, p[:k]...)
			d.crc = crc32.Update(d.crc, crc32.IEEETable, p[:k])
			p = p[k:]
			if len(d.headers) == d.hlen {
				d.state = stPayload
				d.checkEmpty()
			}
		case stPayload:
			k := min(len(p), d.payloadLen-d.n)
			d.crc = crc32.Update(d.crc, crc32.IEEETable, p[:k])
			if keep := min(k, d.maxPayload-len(d.payload)); keep > 0 {
				d.payload = append(d.payload, p[:keep]...)
			}
			d.n += k
			p = p[k:]
			d.checkEmpty()
		case stCRC:
			k := copy(d.crcBuf[d.n:], p)
			d.n += k
			p = p[k:]
			if d.n == crcLen {
				d.finish(fn)
			}
		}
	}
	return d.err
}

// checkEmpty moves past a payload that is complete (or empty).
func (d *Decoder) checkEmpty() {
	if d.state == stPayload && d.n == d.payloadLen {
		d.state, d.n = stCRC, 0
	}
}

func (d *Decoder) fail(err error) {
	d.state, d.err = stError, err
	// Release what a bad frame may have grown.
	d.headers, d.payload = nil, nil
}

// startMessage validates a complete prelude.
func (d *Decoder) startMessage() {
	total := binary.BigEndian.Uint32(d.prelude[0:4])
	hlen := binary.BigEndian.Uint32(d.prelude[4:8])
	want := binary.BigEndian.Uint32(d.prelude[8:12])
	if got := crc32.ChecksumIEEE(d.prelude[:8]); got != want {
		d.fail(fmt.Errorf("%w: prelude CRC %08x, want %08x", ErrCRC, got, want))
		return
	}
	switch {
	case int64(total) > int64(d.maxMessage):
		d.fail(fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, total, d.maxMessage))
		return
	case total < minMessage || int64(hlen) > int64(total)-minMessage:
		d.fail(fmt.Errorf("%w: total length %d, headers length %d", ErrMalformed, total, hlen))
		return
	case hlen > MaxHeadersBytes:
		d.fail(fmt.Errorf("%w: headers of %d bytes, limit %d", ErrTooLarge, hlen, MaxHeadersBytes))
		return
	}
	d.total, d.hlen = int(total), int(hlen)
	d.payloadLen = d.total - d.hlen - minMessage
	d.crc = crc32.Update(0, crc32.IEEETable, d.prelude[:])
	d.headers, d.payload = d.headers[:0], d.payload[:0]
	d.n = 0
	d.state = stHeaders
	if d.hlen == 0 {
		d.state = stPayload
		d.checkEmpty()
	}
}

// finish checks the message CRC and hands the message over.
func (d *Decoder) finish(fn func(*Message)) {
	want := binary.BigEndian.Uint32(d.crcBuf[:])
	if d.crc != want {
		d.fail(fmt.Errorf("%w: message CRC %08x, want %08x", ErrCRC, d.crc, want))
		return
	}
	if err := validHeaders(d.headers); err != nil {
		d.fail(err)
		return
	}
	d.msg = Message{Headers: d.headers, Payload: d.payload, PayloadLen: d.payloadLen,
		Truncated: d.payloadLen > len(d.payload)}
	d.state, d.n = stPrelude, 0
	if fn != nil {
		fn(&d.msg)
	}
}
