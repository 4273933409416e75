package contentcoding

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// compress encodes b with a coding, as an upstream would.
func compress(t testing.TB, coding string, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	var w io.WriteCloser
	var err error
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&out)
	case "deflate":
		w = zlib.NewWriter(&out)
	case "deflate-raw":
		w, err = flate.NewWriter(&out, flate.DefaultCompression)
	case "br":
		w = brotli.NewWriter(&out)
	case "zstd":
		w, err = zstd.NewWriter(&out)
	case "identity":
		return bytes.Clone(b)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// headerName maps a test coding to its Content-Encoding value.
func headerName(coding string) string {
	if coding == "deflate-raw" {
		return "deflate"
	}
	return coding
}

var codings = []string{"identity", "gzip", "deflate", "deflate-raw", "br", "zstd"}

// decode feeds data in the pieces cuts make and returns the output and
// the first error.
func decode(t testing.TB, coding string, data []byte, maxOut int64, cuts ...int) ([]byte, error) {
	t.Helper()
	var out []byte
	d, err := NewDecoder(headerName(coding), func(p []byte) { out = append(out, p...) }, maxOut)
	if err != nil {
		t.Fatal(err)
	}
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	prev := 0
	for _, c := range cuts {
		keep(d.Write(data[prev:c]))
		prev = c
	}
	keep(d.Write(data[prev:]))
	keep(d.Close())
	return out, first
}

func fixture(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/openai/chat_include_usage.sse")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTripEverySplit(t *testing.T) {
	plain := fixture(t)
	for _, coding := range codings {
		t.Run(coding, func(t *testing.T) {
			data := compress(t, coding, plain)
			for i := 0; i <= len(data); i++ {
				got, err := decode(t, coding, data, 0, i)
				if err != nil || !bytes.Equal(got, plain) {
					t.Fatalf("split at %d: got %d bytes (%v), want %d", i, len(got), err, len(plain))
				}
			}
			r := make([]int, 0, len(data))
			for i := 1; i < len(data); i++ {
				r = append(r, i)
			}
			if got, err := decode(t, coding, data, 0, r...); err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("byte by byte: got %d bytes (%v), want %d", len(got), err, len(plain))
			}
		})
	}
}

func TestRoundTripLarge(t *testing.T) {
	plain := bytes.Repeat(fixture(t), 300) // ~2 MiB, past every window
	rng := rand.New(rand.NewPCG(3, 4))
	for _, coding := range codings {
		t.Run(coding, func(t *testing.T) {
			data := compress(t, coding, plain)
			var cuts []int
			for c := rng.IntN(20000); c < len(data); c += 1 + rng.IntN(20000) {
				cuts = append(cuts, c)
			}
			got, err := decode(t, coding, data, 0, cuts...)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("got %d bytes (%v), want %d", len(got), err, len(plain))
			}
		})
	}
}

func TestGzipMultipleMembers(t *testing.T) {
	data := append(compress(t, "gzip", []byte("first ")), compress(t, "gzip", []byte("second"))...)
	got, err := decode(t, "gzip", data, 0, 5)
	if err != nil || string(got) != "first second" {
		t.Errorf("got %q (%v), want %q", got, err, "first second")
	}
}

func TestTruncatedAndCorrupt(t *testing.T) {
	plain := fixture(t)
	for _, coding := range codings[1:] {
		t.Run(coding, func(t *testing.T) {
			data := compress(t, coding, plain)
			got, err := decode(t, coding, data[:len(data)*2/3], 0)
			if err == nil {
				t.Errorf("truncated: got no error")
			}
			if !bytes.HasPrefix(plain, got) {
				t.Errorf("truncated: output is not a prefix of the body")
			}
			bad := bytes.Clone(data)
			for i := len(bad) / 3; i < len(bad)/3+8; i++ {
				bad[i] ^= 0x5a
			}
			if _, err := decode(t, coding, bad, 0); err == nil {
				t.Errorf("corrupt: got no error")
			}
			if _, err := decode(t, coding, []byte("not compressed at all"), 0); err == nil {
				t.Errorf("garbage: got no error")
			}
		})
	}
}

// TestBomb: a tiny body that expands to 64 MiB stops at maxOut, quickly.
func TestBomb(t *testing.T) {
	zeros := make([]byte, 64<<20)
	for _, coding := range []string{"gzip", "zstd", "br"} {
		t.Run(coding, func(t *testing.T) {
			if coding == "br" {
				zeros = zeros[:16<<20] // brotli's encoder is slow on huge inputs
			}
			data := compress(t, coding, zeros)
			start := time.Now()
			var n int64
			d, _ := NewDecoder(coding, func(p []byte) { n += int64(len(p)) }, 1<<20)
			err := d.Write(data)
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("got %v, want ErrTooLarge", err)
			}
			if err := d.Write(data); !errors.Is(err, ErrTooLarge) {
				t.Errorf("after the limit got %v, want ErrTooLarge again", err)
			}
			_ = d.Close()
			if n != 1<<20 {
				t.Errorf("sink got %d bytes, want exactly 1 MiB", n)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("took %v to stop", el)
			}
		})
	}
	if _, err := decode(t, "identity", make([]byte, 10), 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("identity: got %v, want ErrTooLarge", err)
	}
}

func TestUnsupported(t *testing.T) {
	for _, enc := range []string{"compress", "gzip, br", "x-unknown"} {
		if _, err := NewDecoder(enc, func([]byte) {}, 0); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%q: got %v, want ErrUnsupported", enc, err)
		}
	}
	for _, enc := range []string{"GZIP", " br ", "x-gzip", "Identity", ""} {
		d, err := NewDecoder(enc, func([]byte) {}, 0)
		if err != nil {
			t.Errorf("%q: got %v, want a decoder", enc, err)
			continue
		}
		_ = d.Close()
	}
}

// TestSinkOnlyDuringCalls: output reaches the sink while Write or Close
// runs, never afterwards (the caller's reader is not locked).
func TestSinkOnlyDuringCalls(t *testing.T) {
	plain := bytes.Repeat(fixture(t), 50)
	for _, coding := range codings {
		data := compress(t, coding, plain)
		inCall := false
		var n int
		d, _ := NewDecoder(headerName(coding), func(p []byte) {
			if !inCall {
				t.Fatalf("%s: sink called outside Write/Close", coding)
			}
			n += len(p)
		}, 0)
		for i := 0; i < len(data); i += 1000 {
			inCall = true
			_ = d.Write(data[i:min(i+1000, len(data))])
			inCall = false
		}
		inCall = true
		_ = d.Close()
		inCall = false
		time.Sleep(time.Millisecond)
		if n != len(plain) {
			t.Errorf("%s: got %d bytes, want %d", coding, n, len(plain))
		}
	}
}

// TestNoGoroutineLeak: every decoder's coroutine ends at Close, whether
// the body was complete, cut, corrupt or over the limit.
func TestNoGoroutineLeak(t *testing.T) {
	plain := fixture(t)
	before := runtime.NumGoroutine()
	for _, coding := range codings {
		data := compress(t, coding, plain)
		for _, body := range [][]byte{data, data[:len(data)/2], {}, []byte("garbage!")} {
			for range 20 {
				d, _ := NewDecoder(headerName(coding), func([]byte) {}, 100)
				_ = d.Write(body)
				_ = d.Close()
				_ = d.Close() // twice is fine
			}
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("goroutines: %d before, %d after\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

// TestWhileOpen: an open decoder holds one parked coroutine, no more.
func TestWhileOpen(t *testing.T) {
	before := runtime.NumGoroutine()
	var open []Decoder
	for _, coding := range codings[1:] {
		data := compress(t, coding, fixture(t))
		d, _ := NewDecoder(headerName(coding), func([]byte) {}, 0)
		_ = d.Write(data[:len(data)/2])
		open = append(open, d)
	}
	if n := runtime.NumGoroutine() - before; n > len(open) {
		t.Errorf("%d decoders hold %d goroutines, want at most one each", len(open), n)
	}
	for _, d := range open {
		_ = d.Close()
	}
}

func FuzzDecoder(f *testing.F) {
	plain := []byte(strings.Repeat("data: {\"usage\":null}\n\n", 20))
	for i, coding := range codings {
		f.Add(uint8(i), compress(f, coding, plain), uint16(10))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte, cut uint16) {
		coding := codings[int(which)%len(codings)]
		c := int(cut) % (len(data) + 1)
		whole, werr := decode(t, coding, data, 1<<20)
		split, serr := decode(t, coding, data, 1<<20, c)
		if (werr == nil) != (serr == nil) {
			t.Fatalf("%s split at %d: got error %v, whole gave %v", coding, c, serr, werr)
		}
		// A good body decodes the same however it is split. Before the
		// error in a bad one, a decoder may emit more or less depending
		// on how much input it had: one output is a prefix of the other.
		if werr == nil && !bytes.Equal(whole, split) ||
			werr != nil && !bytes.HasPrefix(whole, split) && !bytes.HasPrefix(split, whole) {
			t.Fatalf("%s split at %d: got %d bytes (%v), whole gave %d (%v)", coding, c, len(split), serr, len(whole), werr)
		}
		if len(whole) > 1<<20 {
			t.Fatalf("got %d bytes past the limit", len(whole))
		}
	})
}
