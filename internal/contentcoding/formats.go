package contentcoding

import (
	"io"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// zstdMaxWindow is the largest zstd window accepted: RFC 8878 asks HTTP
// decoders to support 8 MiB and allows refusing more, which bounds the
// memory a hostile upstream can make a stream take.
const zstdMaxWindow = 8 << 20

// Decompressors are pooled: their windows and tables are most of what a
// compressed response costs (a zstd decoder's buffers run to megabytes).
var (
	gzipReaders   sync.Pool // *gzip.Reader
	brotliReaders sync.Pool // *brotli.Reader
	zstdDecoders  sync.Pool // *zstd.Decoder
)

func openGzip(src *source) (io.Reader, func(), error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(src)
	} else {
		err = zr.Reset(src)
	}
	if err != nil {
		return nil, nil, err
	}
	return zr, func() { gzipReaders.Put(zr) }, nil
}

// openDeflate accepts both meanings of "deflate": zlib-wrapped (RFC 1950,
// what the standard says) and raw deflate (what some servers send).
func openDeflate(src *source) (io.Reader, func(), error) {
	var hdr [2]byte
	for i := range hdr {
		c, err := src.ReadByte()
		if err != nil {
			return nil, nil, err
		}
		hdr[i] = c
	}
	in := &peeked{hdr: hdr[:], src: src}
	// A zlib header: compression method 8, and the two bytes a multiple
	// of 31 when read as one big-endian number.
	if hdr[0]&0x0f == 8 && (uint16(hdr[0])<<8|uint16(hdr[1]))%31 == 0 {
		zr, err := zlib.NewReader(in)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { _ = zr.Close() }, nil
	}
	fr := flate.NewReader(in)
	return fr, func() { _ = fr.Close() }, nil
}

// peeked replays the peeked header bytes, then reads src. It is an
// io.ByteReader, so flate reads it directly rather than through a bufio
// layer.
type peeked struct {
	hdr []byte
	src *source
}

func (p *peeked) Read(b []byte) (int, error) {
	if len(p.hdr) == 0 {
		return p.src.Read(b)
	}
	n := copy(b, p.hdr)
	p.hdr = p.hdr[n:]
	return n, nil
}

func (p *peeked) ReadByte() (byte, error) {
	if len(p.hdr) == 0 {
		return p.src.ReadByte()
	}
	c := p.hdr[0]
	p.hdr = p.hdr[1:]
	return c, nil
}

func openBrotli(src *source) (io.Reader, func(), error) {
	br, _ := brotliReaders.Get().(*brotli.Reader)
	if br == nil {
		br = brotli.NewReader(src)
	} else {
		_ = br.Reset(src)
	}
	return br, func() {
		_ = br.Reset(nil)
		brotliReaders.Put(br)
	}, nil
}

func openZstd(src *source) (io.Reader, func(), error) {
	zr, _ := zstdDecoders.Get().(*zstd.Decoder)
	if zr == nil {
		var err error
		zr, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1), // decode on this coroutine: no goroutines of its own
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, nil, err
		}
	}
	if err := zr.Reset(src); err != nil {
		zr.Close()
		return nil, nil, err
	}
	return zr, func() {
		_ = zr.Reset(nil)
		zstdDecoders.Put(zr)
	}, nil
}
