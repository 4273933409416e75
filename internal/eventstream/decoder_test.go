package eventstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	aws "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// decoded is a message copied out of the callback.
type decoded struct {
	headers, payload string
	payloadLen       int
	truncated        bool
}

// decodeAll feeds stream in the pieces that cuts make and returns the
// messages and the final error.
func decodeAll(opts Options, stream []byte, cuts ...int) ([]decoded, error) {
	d := NewDecoder(opts)
	var out []decoded
	fn := func(m *Message) {
		out = append(out, decoded{string(m.Headers), string(m.Payload), m.PayloadLen, m.Truncated})
	}
	prev := 0
	for _, c := range cuts {
		_ = d.Write(stream[prev:c], fn)
		prev = c
	}
	err := d.Write(stream[prev:], fn)
	return out, err
}

// encode frames messages with the AWS SDK's encoder.
func encode(t testing.TB, msgs ...aws.Message) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := aws.NewEncoder()
	for _, m := range msgs {
		if err := enc.Encode(&b, m); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func allTypes() aws.Headers {
	return aws.Headers{
		{Name: "t", Value: aws.BoolValue(true)},
		{Name: "f", Value: aws.BoolValue(false)},
		{Name: "i8", Value: aws.Int8Value(-3)},
		{Name: "i16", Value: aws.Int16Value(300)},
		{Name: "i32", Value: aws.Int32Value(70000)},
		{Name: "i64", Value: aws.Int64Value(1 << 40)},
		{Name: "bytes", Value: aws.BytesValue([]byte{0, 1, 2})},
		{Name: ":event-type", Value: aws.StringValue("metadata")},
		{Name: "ts", Value: aws.TimestampValue(time.UnixMilli(1767225600000))},
		{Name: "uuid", Value: aws.UUIDValue{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
	}
}

func TestDecodeEverySplit(t *testing.T) {
	stream := encode(t,
		aws.Message{Headers: allTypes(), Payload: []byte(`{"usage":{"inputTokens":1}}`)},
		aws.Message{}, // no headers, no payload
		aws.Message{Payload: []byte("payload only")},                               // no headers
		aws.Message{Headers: aws.Headers{{Name: "h", Value: aws.StringValue("")}}}, // no payload
	)
	want, err := decodeAll(Options{}, stream)
	if err != nil || len(want) != 4 {
		t.Fatalf("got %d messages and error %v, want 4 and none", len(want), err)
	}
	if want[0].payload != `{"usage":{"inputTokens":1}}` || want[2].payload != "payload only" {
		t.Fatalf("got payloads %q, %q", want[0].payload, want[2].payload)
	}
	for i := 0; i <= len(stream); i++ {
		for _, j := range []int{i, min(i+1, len(stream)), min(i+13, len(stream))} {
			got, err := decodeAll(Options{}, stream, i, j)
			if err != nil || !equal(got, want) {
				t.Fatalf("cuts %d,%d: got %v (%v), want %v", i, j, got, err, want)
			}
		}
	}
}

func equal(a, b []decoded) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHeaderLookup(t *testing.T) {
	stream := encode(t, aws.Message{Headers: allTypes()})
	var m *Message
	d := NewDecoder(Options{})
	var got []byte
	var typ byte
	var ok bool
	_ = d.Write(stream, func(msg *Message) {
		m = msg
		got, typ, ok = m.Header(":event-type")
		if !m.HeaderIs(":event-type", "metadata") || m.HeaderIs(":event-type", "metadat") || m.HeaderIs("i32", "x") {
			t.Error("HeaderIs gave a wrong answer")
		}
		if v, typ, ok := m.Header("i32"); !ok || typ != TypeInt32 || binary.BigEndian.Uint32(v) != 70000 {
			t.Errorf("got i32 %v %d %v, want 70000", v, typ, ok)
		}
		if _, _, ok := m.Header("missing"); ok {
			t.Error("found a header that is not there")
		}
	})
	if !ok || typ != TypeString || string(got) != "metadata" {
		t.Errorf("got %q type %d ok %v, want metadata", got, typ, ok)
	}
}

func TestTruncatedPayloadStaysInSync(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1000)
	stream := encode(t, aws.Message{Payload: big}, aws.Message{Payload: []byte("next")})
	got, err := decodeAll(Options{MaxPayloadBytes: 100}, stream, 7, 500)
	if err != nil {
		t.Fatal(err)
	}
	want := []decoded{{"", string(big[:100]), 1000, true}, {"", "next", 4, false}}
	if !equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// frame builds a raw frame with correct checksums around the given
// lengths, for inputs the AWS encoder refuses to make.
func frame(total, hlen uint32, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, total)
	b = binary.BigEndian.AppendUint32(b, hlen)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func TestErrors(t *testing.T) {
	good := encode(t, aws.Message{Headers: aws.Headers{{Name: "a", Value: aws.StringValue("b")}}, Payload: []byte("{}")})
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 1
		return b
	}
	tests := []struct {
		name   string
		stream []byte
		want   error
	}{
		{"prelude crc", flip(9), ErrCRC},
		{"length in prelude", flip(3), ErrCRC},
		{"payload byte", flip(len(good) - 5), ErrCRC},
		{"message crc", flip(len(good) - 1), ErrCRC},
		{"over 16 MiB", frame(16<<20+1, 0, nil), ErrTooLarge},
		{"headers over 128 KiB", frame(200<<10, 129<<10, nil), ErrTooLarge},
		{"shorter than a frame", frame(15, 0, nil), ErrMalformed},
		{"headers past the end", frame(20, 8, []byte{0, 0, 0, 0}), ErrMalformed},
		{"bad header type", frame(16+4, 4, []byte{1, 'a', 42, 0}), ErrMalformed},
		{"truncated header value", frame(16+5, 5, []byte{1, 'a', 7, 0, 9}), ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The good frame after the bad one must not be decoded: the
			// framing cannot be trusted once broken.
			stream := append(bytes.Clone(tc.stream), good...)
			got, err := decodeAll(Options{}, stream)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got error %v, want %v", err, tc.want)
			}
			if len(got) != 0 {
				t.Errorf("got %d messages after the error, want 0", len(got))
			}
		})
	}
}

// TestOversizedFrameDoesNotAllocate: a prelude announcing a huge frame is
// refused before anything is buffered.
func TestOversizedFrameDoesNotAllocate(t *testing.T) {
	d := NewDecoder(Options{MaxMessageBytes: 1 << 10})
	err := d.Write(frame(1<<30, 0, nil)[:preludeLen], nil)
	if !errors.Is(err, ErrTooLarge) || d.Buffered() != 0 {
		t.Errorf("got error %v and %d bytes buffered, want ErrTooLarge and 0", err, d.Buffered())
	}
	if err := d.Write([]byte("more"), nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("got %v after the error, want it again", err)
	}
}

func TestBoundedMemory(t *testing.T) {
	big := bytes.Repeat([]byte("y"), 3<<20)
	stream := encode(t, aws.Message{Payload: big})
	d := NewDecoder(Options{MaxPayloadBytes: 64 << 10})
	for i := 0; i < len(stream); i += 4096 {
		_ = d.Write(stream[i:min(i+4096, len(stream))], nil)
		if d.Buffered() > 128<<10 {
			t.Fatalf("buffered %d bytes, want at most 128 KiB", d.Buffered())
		}
	}
}

func FuzzDecoder(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/bedrock/*.eventstream")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b, uint16(len(b)/3))
		}
	}
	f.Add(frame(16<<20+1, 0, nil), uint16(3))
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		c := int(cut) % (len(stream) + 1)
		whole, werr := decodeAll(Options{MaxPayloadBytes: 256}, stream)
		split, serr := decodeAll(Options{MaxPayloadBytes: 256}, stream, c)
		if !equal(whole, split) || (werr == nil) != (serr == nil) {
			t.Fatalf("split at %d: got %v (%v), whole gave %v (%v)", c, split, serr, whole, werr)
		}
	})
}

// FuzzRoundTrip: whatever the AWS encoder frames, the decoder reads back.
func FuzzRoundTrip(f *testing.F) {
	f.Add("name", "value", []byte(`{"a":1}`), uint8(3), uint16(17))
	f.Add("", "", []byte{}, uint8(1), uint16(0))
	f.Fuzz(func(t *testing.T, name, value string, payload []byte, n uint8, cut uint16) {
		if len(name) == 0 || len(name) > 255 || len(value) > 1<<15-1 {
			return
		}
		msg := aws.Message{Headers: aws.Headers{{Name: name, Value: aws.StringValue(value)}}, Payload: payload}
		var msgs []aws.Message
		for range n%4 + 1 {
			msgs = append(msgs, msg)
		}
		stream := encode(t, msgs...)
		c := int(cut) % (len(stream) + 1)
		got, err := decodeAll(Options{}, stream, c)
		if err != nil || len(got) != len(msgs) {
			t.Fatalf("got %d messages (%v), want %d", len(got), err, len(msgs))
		}
		d := NewDecoder(Options{})
		_ = d.Write(stream, func(m *Message) {
			v, typ, ok := m.Header(name)
			if !ok || typ != TypeString || string(v) != value || !bytes.Equal(m.Payload, payload) {
				t.Fatalf("got header %q (%v) payload %q, want %q %q", v, ok, m.Payload, value, payload)
			}
		})
	})
}
