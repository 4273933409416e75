package extproc

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// flusher is a compressing writer that can make what it was given so
// far decodable.
type flusher interface {
	io.WriteCloser
	Flush() error
}

// codings are the content codings a streamed response may arrive in,
// with the most memory an open stream may hold in each. A plain or gzip
// stream holds at most 64 KiB (gzip's window is 32 KiB). A brotli or zstd
// decompressor must keep the window the upstream's encoder declared (up
// to 16 MiB for brotli, and up to the 8 MiB contentcoding accepts for
// zstd) and state of its own beside it (zstd keeps a 128 KiB block
// buffer and literal buffers whatever the window): the encoders here
// declare 64 KiB windows, and the limits are that window and that state
// on top of 64 KiB, as measured, so that a change that makes a decoder
// hold more fails.
var codings = []struct {
	name  string
	new   func(w io.Writer) flusher
	limit int64
}{
	{"identity", nil, 64 << 10},
	{"gzip", func(w io.Writer) flusher { return gzip.NewWriter(w) }, 64 << 10},
	{"br", func(w io.Writer) flusher {
		return brotli.NewWriterOptions(w, brotli.WriterOptions{Quality: 5, LGWin: 16})
	}, 64<<10 + 64<<10 + 32<<10},
	{"zstd", func(w io.Writer) flusher {
		zw, _ := zstd.NewWriter(w, zstd.WithWindowSize(64<<10))
		return zw
	}, 64<<10 + 64<<10 + 192<<10},
}

// TestRetainedPerStreamEveryAPI: a stream waiting for more of its
// response, after a 96 KiB event and part of the provider's recorded
// stream, holds at most its coding's limit, in every API: the reader's
// buffers shrink after a large event, the decompressor holds its window
// and little more, and nothing of the request stays. It measures the
// heap that 100 such streams, parked, hold.
func TestRetainedPerStreamEveryAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap of 100 streams per case")
	}
	const streams = 100
	srv := lifecycleServer(t)
	for _, api := range streamedAPIs {
		for _, coding := range codings {
			// The response up to where the streams are parked, then the
			// rest.
			fixture := readFixture(t, api.response)
			var head []byte
			if api.event != nil {
				head = append(head, api.event(strings.Repeat("long answer ", 8<<10))...)
				head = append(head, api.event(escapedText)...)
			}
			head = append(head, fixture[:len(fixture)/2]...)
			sent := head
			call := streamedCall(t, api.path, api.request, api.contentType)
			if coding.new != nil {
				var buf bytes.Buffer
				w := coding.new(&buf)
				if _, err := w.Write(head); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				sent = buf.Bytes()
				h := call[2].GetResponseHeaders().Headers
				h.Headers = append(h.Headers, &corev3.HeaderValue{Key: "content-encoding", RawValue: []byte(coding.name)})
			}
			msgs := append(call, bodyChunks(sent, 16<<10)...)
			open := make([]*stream, streams)
			var before, after runtime.MemStats
			// Twice: pooled decompressors of the cases before are
			// freed in two collections, and must not be freed while
			// this case is measured.
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&before)
			for i := range open {
				st := newStream(srv, context.Background())
				for _, m := range msgs {
					if resp, last := st.handle(m); resp == nil || last || resp.GetImmediateResponse() != nil {
						t.Fatalf("%s, %s: %T: got reply %v, last %v", api.name, coding.name, m.Request, resp, last)
					}
					st.replied() // as Process does once the reply is sent
				}
				open[i] = st
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / streams
			t.Logf("%s, %s: %d bytes retained per open stream", api.name, coding.name, per)
			if per > coding.limit {
				t.Errorf("%s, %s: got %d bytes retained per open stream, want at most %d", api.name, coding.name, per, coding.limit)
			}
			for _, st := range open {
				st.finish()
			}
			runtime.KeepAlive(msgs)
		}
	}
}
