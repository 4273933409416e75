package contentcoding

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync"
)

// Decoder decodes one response body. Write and Close must not be called
// concurrently.
type Decoder interface {
	// Write feeds the next compressed bytes. Decoded output goes to the
	// sink before Write returns, except for what the format holds back
	// until it has more input. Write does not retain p. After an error
	// (corrupt input, output over the limit) it ignores its input and
	// returns that error.
	Write(p []byte) error
	// Close ends the input, flushes what is left to the sink and releases
	// the decoder. It reports a stream that ended early or was corrupt.
	// It is safe to call more than once.
	Close() error
}

var (
	// ErrTooLarge is returned once the decoded output exceeds maxOut.
	ErrTooLarge = errors.New("contentcoding: decoded body exceeds the limit")
	// ErrUnsupported is returned by NewDecoder for a coding it does not
	// know (or a list of codings).
	ErrUnsupported = errors.New("contentcoding: unsupported content-encoding")

	errStopped = errors.New("contentcoding: decoder closed")
)

// outBufSize is the decompressor's output buffer. The coroutine holds it
// for the whole response, parked inside the decompressor's Read while it
// waits for the next chunk, so it counts in what every open stream holds;
// 4 KiB passes a chunk's output to the sink in a few calls and keeps a
// gzip stream (whose window is 32 KiB) within 64 KiB.
const outBufSize = 4 << 10

// outBufs recycles output buffers across responses.
var outBufs = sync.Pool{New: func() any { return new([outBufSize]byte) }}

// NewDecoder returns a decoder for a Content-Encoding value ("gzip",
// "x-gzip", "deflate", "br", "zstd", or "identity"/"" for none) that
// passes at most maxOut decoded bytes to sink (maxOut <= 0 means no
// limit). sink must not retain its argument.
func NewDecoder(encoding string, sink func([]byte), maxOut int64) (Decoder, error) {
	if maxOut <= 0 {
		maxOut = 1<<63 - 1
	}
	var open opener
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		return &identity{sink: sink, left: maxOut}, nil
	case "gzip", "x-gzip":
		open = openGzip
	case "deflate":
		open = openDeflate
	case "br":
		open = openBrotli
	case "zstd":
		open = openZstd
	default:
		return nil, fmt.Errorf("%w: %.32q", ErrUnsupported, encoding)
	}
	d := &pull{sink: sink, left: maxOut, open: open}
	d.next, d.stop = iter.Pull(d.run)
	return d, nil
}

// opener starts a decompressor on src; release hands it back for reuse
// once it is done.
type opener func(src *source) (r io.Reader, release func(), err error)

// identity passes bytes through, still bounded by maxOut.
type identity struct {
	sink func([]byte)
	left int64
	err  error
}

func (d *identity) Write(p []byte) error {
	if d.err != nil {
		return d.err
	}
	if int64(len(p)) > d.left {
		p, d.err = p[:d.left], ErrTooLarge
	}
	d.left -= int64(len(p))
	if len(p) > 0 {
		d.sink(p)
	}
	return d.err
}

func (d *identity) Close() error { return d.err }

// pull runs a pull-style decompressor as a coroutine.
type pull struct {
	sink func([]byte)
	left int64
	open opener

	next  func() (struct{}, bool)
	stop  func()
	yield func(struct{}) bool

	in     []byte // the part of the current chunk not read yet
	eof    bool   // Close was called: no more input
	done   bool   // the coroutine has returned
	closed bool
	err    error
}

// source is the decompressor's input: it parks the coroutine whenever
// the current chunk is used up.
type source struct{ d *pull }

func (s *source) fill() error {
	d := s.d
	for len(d.in) == 0 {
		if d.eof {
			return io.EOF
		}
		if !d.yield(struct{}{}) {
			return errStopped
		}
	}
	return nil
}

func (s *source) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := s.fill(); err != nil {
		return 0, err
	}
	n := copy(p, s.d.in)
	s.d.in = s.d.in[n:]
	return n, nil
}

// ReadByte lets flate read bit by bit without a bufio layer (and its
// read-ahead copy).
func (s *source) ReadByte() (byte, error) {
	if err := s.fill(); err != nil {
		return 0, err
	}
	c := s.d.in[0]
	s.d.in = s.d.in[1:]
	return c, nil
}

// run is the coroutine: it decompresses until the stream ends, fails, or
// the decoder is closed.
func (d *pull) run(yield func(struct{}) bool) {
	d.yield = yield
	defer func() {
		// A decompressor must not take the server down with it.
		if r := recover(); r != nil {
			d.fail(fmt.Errorf("contentcoding: decoder panicked: %v", r))
		}
	}()
	r, release, err := d.open(&source{d})
	if err != nil {
		d.fail(err)
		return
	}
	d.pump(r)
	// Not deferred: a decompressor that panicked is not fit for reuse.
	release()
}

// pump copies the decompressor's output to the sink until the stream
// ends, fails or is stopped.
func (d *pull) pump(r io.Reader) {
	buf := outBufs.Get().(*[outBufSize]byte)
	defer outBufs.Put(buf)
	for {
		n, err := r.Read(buf[:])
		if n > 0 && !d.emit(buf[:n]) {
			return
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			d.fail(err)
			return
		}
	}
}

// emit passes output to the sink within the limit; false stops decoding.
func (d *pull) emit(p []byte) bool {
	if int64(len(p)) > d.left {
		p = p[:d.left]
		d.fail(ErrTooLarge)
	}
	d.left -= int64(len(p))
	if len(p) > 0 {
		d.sink(p)
	}
	return d.err == nil
}

func (d *pull) fail(err error) {
	if d.err != nil {
		return
	}
	if errors.Is(err, errStopped) {
		return
	}
	if err == io.EOF {
		// The decompressor met the end of input inside its stream.
		err = io.ErrUnexpectedEOF
	}
	d.err = err
}

// resume runs the coroutine until it wants more input or returns.
func (d *pull) resume() {
	if d.done {
		return
	}
	if _, ok := d.next(); !ok {
		d.done = true
	}
}

func (d *pull) Write(p []byte) error {
	if d.err != nil || d.closed {
		return d.err
	}
	if len(p) == 0 || d.done {
		// Bytes after the end of the compressed stream are ignored.
		return nil
	}
	d.in = p
	d.resume()
	d.in = nil
	if d.done && d.err == nil {
		d.stop()
	}
	return d.err
}

func (d *pull) Close() error {
	if d.closed {
		return d.err
	}
	d.closed = true
	if d.err == nil && !d.done {
		d.eof = true
		d.resume()
	}
	d.stop()
	d.done = true
	return d.err
}
