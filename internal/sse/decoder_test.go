package sse

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// decode feeds writes to a fresh decoder, one Write each, and returns the events.
func decode(t testing.TB, opts Options, writes ...[]byte) []event {
	t.Helper()
	d := NewDecoder(opts)
	var got []event
	collect := func(e Event) { got = append(got, copyEvent(e)) }
	for _, w := range writes {
		d.Write(w, collect)
		checkBuffered(t, d, opts)
	}
	return got
}

// bufferBound is what Buffered may report at most: the data bound, the type, the
// last ID and the ID being read, and the bytes of a field name or BOM cut by a Write.
func bufferBound(opts Options) int {
	maxData := opts.MaxEventBytes
	if maxData <= 0 {
		maxData = DefaultMaxEventBytes
	}
	return maxData + 3*MaxFieldBytes + maxNameLen + len(bom)
}

func checkBuffered(t testing.TB, d *Decoder, opts Options) {
	t.Helper()
	if got, limit := d.Buffered(), bufferBound(opts); got > limit {
		t.Fatalf("Buffered() = %d, want <= %d", got, limit)
	}
	if got, limit := cap(d.data), d.maxData; got > limit {
		t.Fatalf("cap(data) = %d, want <= %d", got, limit)
	}
	if got := max(cap(d.typ), cap(d.id), cap(d.idNext)); got > MaxFieldBytes {
		t.Fatalf("cap of type/id buffers = %d, want <= %d", got, MaxFieldBytes)
	}
}

func checkEvents(t testing.TB, what string, got, want []event) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	t.Errorf("%s: got %d events, want %d", what, len(got), len(want))
	for i := range max(len(got), len(want)) {
		var g, w any = "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("%s: event %d: got %v, want %v", what, i, g, w)
		}
	}
}

// checkSplitInvariance checks that the events do not depend on how input is cut into
// Writes: at every single boundary, and one byte at a time.
func checkSplitInvariance(t *testing.T, opts Options, input []byte, want []event) {
	t.Helper()
	for k := 0; k <= len(input); k++ {
		got := decode(t, opts, input[:k], input[k:])
		if !slices.Equal(got, want) {
			checkEvents(t, "split at "+strconv.Itoa(k), got, want)
			return
		}
	}
	bytewise := make([][]byte, len(input))
	for i := range input {
		bytewise[i] = input[i : i+1]
	}
	checkEvents(t, "1-byte writes", decode(t, opts, bytewise...), want)
}

func TestDecoderRules(t *testing.T) {
	long := strings.Repeat("x", 2*MaxFieldBytes)
	tests := []struct {
		name   string
		max    int
		writes []string
		want   []event
	}{
		{name: "LF terminators", writes: []string{"data: hello\n\n"},
			want: []event{{Data: "hello", DataLen: 5}}},
		{name: "CRLF terminators", writes: []string{"data: hello\r\n\r\n"},
			want: []event{{Data: "hello", DataLen: 5}}},
		{name: "lone CR terminators", writes: []string{"data: hello\r\r"},
			want: []event{{Data: "hello", DataLen: 5}}},
		{name: "mixed terminators", writes: []string{"data: a\rdata: b\r\ndata: c\n\r\n"},
			want: []event{{Data: "a\nb\nc", DataLen: 5}}},
		{name: "CR and LF split across writes are one terminator", writes: []string{"data: x\r", "\ndata: y\r", "\n\r", "\n"},
			want: []event{{Data: "x\ny", DataLen: 3}}},
		{name: "empty write between CR and LF keeps them one terminator", writes: []string{"data: x\r", "", "\ndata: y\n\n"},
			want: []event{{Data: "x\ny", DataLen: 3}}},
		{name: "CR ending a write ends the line at once", writes: []string{"data: x\r", "data: y\r\n\r\n"},
			want: []event{{Data: "x\ny", DataLen: 3}}},
		{name: "CR then CR across writes is a blank line", writes: []string{"data: x\r", "\r"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "LF then CR is two terminators", writes: []string{"data: x\n\r"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "comments ignored", writes: []string{": keep-alive\n\ndata: x\n:comment: with colon\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "bare colon is a comment", writes: []string{":\ndata: x\n:\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "multi-line data joined with LF", writes: []string{"data: a\ndata: b\ndata: c\n\n"},
			want: []event{{Data: "a\nb\nc", DataLen: 5}}},
		{name: "no space after colon", writes: []string{"data:x\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "only one leading space dropped", writes: []string{"data:  x \n\n"},
			want: []event{{Data: " x ", DataLen: 3}}},
		{name: "leading tab kept", writes: []string{"data:\tx\n\n"},
			want: []event{{Data: "\tx", DataLen: 2}}},
		{name: "space dropped across writes", writes: []string{"data:", " x\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "second space kept across writes", writes: []string{"data: ", " x\n\n"},
			want: []event{{Data: " x", DataLen: 2}}},
		{name: "colons in value kept", writes: []string{"data: a:b: c\n\n"},
			want: []event{{Data: "a:b: c", DataLen: 6}}},
		{name: "empty data field dispatches empty event", writes: []string{"data:\n\n"},
			want: []event{{}}},
		{name: "field without colon is data with empty value", writes: []string{"data\n\n"},
			want: []event{{}}},
		{name: "field without colon joins an empty line", writes: []string{"data: a\ndata\ndata: b\n\n"},
			want: []event{{Data: "a\n\nb", DataLen: 4}}},
		{name: "unknown field without colon ignored", writes: []string{"foo\ndata: x\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "field name split across writes", writes: []string{"da", "ta: x\n\n", "eve", "n", "t", ": t\ndata: y\n\n"},
			want: []event{{Data: "x", DataLen: 1}, {Type: "t", Data: "y", DataLen: 1}}},
		{name: "long field name split across writes is unknown", writes: []string{"dat", "a_and_more: x\ndataX", "YZ\ndata: y\n\n"},
			want: []event{{Data: "y", DataLen: 1}}},
		{name: "BOM stripped", writes: []string{"\xEF\xBB\xBFdata: x\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "BOM split across writes stripped", writes: []string{"\xEF", "\xBB", "\xBFdata: x\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "BOM alone in first write stripped", writes: []string{"\xEF\xBB\xBF", "data: x\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "only one BOM stripped", writes: []string{"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n"},
			want: []event{{Data: "y", DataLen: 1}}},
		{name: "partial BOM is content", writes: []string{"\xEF\xBBdata: x\n\ndata: y\n\n"},
			want: []event{{Data: "y", DataLen: 1}}},
		{name: "partial BOM split across writes is content", writes: []string{"\xEF", "\xBB", "data: x\n\ndata: y\n\n"},
			want: []event{{Data: "y", DataLen: 1}}},
		{name: "BOM after start is content", writes: []string{"data: x\n\n\xEF\xBB\xBFdata: y\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "BOM inside data kept", writes: []string{"data: \xEF\xBB\xBFx\n\n"},
			want: []event{{Data: "\xEF\xBB\xBFx", DataLen: 4}}},
		{name: "event without data not dispatched", writes: []string{"event: ping\n\ndata: x\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "id-only event not dispatched", writes: []string{"id: 7\n\n"}},
		{name: "trailing event without blank line not dispatched", writes: []string{"data: x\n\ndata: y\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "trailing line without terminator not dispatched", writes: []string{"data: x\n\ndata: y"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "unknown fields ignored", writes: []string{"foo: bar\nretry: 1000\nDATA: up\nEvent: no\ndata: x\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "event name", writes: []string{"event: message_start\ndata: {}\n\n"},
			want: []event{{Type: "message_start", Data: "{}", DataLen: 2}}},
		{name: "event name reset after dispatch", writes: []string{"event: a\ndata: 1\n\ndata: 2\n\n"},
			want: []event{{Type: "a", Data: "1", DataLen: 1}, {Data: "2", DataLen: 1}}},
		{name: "last event field wins", writes: []string{"event: a\nevent: b\ndata: 1\n\n"},
			want: []event{{Type: "b", Data: "1", DataLen: 1}}},
		{name: "empty event field means message", writes: []string{"event: a\nevent:\ndata: 1\n\n"},
			want: []event{{Data: "1", DataLen: 1}}},
		{name: "event field without colon means message", writes: []string{"event: a\nevent\ndata: 1\n\n"},
			want: []event{{Data: "1", DataLen: 1}}},
		{name: "first colon splits the field", writes: []string{"event:data: x\ndata: y\n\n"},
			want: []event{{Type: "data: x", Data: "y", DataLen: 1}}},
		{name: "id persists across events", writes: []string{"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"},
			want: []event{{ID: "1", Data: "a", DataLen: 1}, {ID: "1", Data: "b", DataLen: 1}, {Data: "c", DataLen: 1}}},
		{name: "id set by an event without data", writes: []string{"id: 1\n\ndata: a\n\n"},
			want: []event{{ID: "1", Data: "a", DataLen: 1}}},
		{name: "id containing NUL ignored", writes: []string{"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n"},
			want: []event{{ID: "1", Data: "a", DataLen: 1}, {ID: "1", Data: "b", DataLen: 1}}},
		{name: "id with NUL past the kept bytes ignored", writes: []string{"id: 1\nid: " + long + "\x00\ndata: a\n\n"},
			want: []event{{ID: "1", Data: "a", DataLen: 1}}},
		{name: "invalid UTF-8 passes through", writes: []string{"event: \xff\xc3\ndata: \xff\xfe\xc3\n\n"},
			want: []event{{Type: "\xff\xc3", Data: "\xff\xfe\xc3", DataLen: 3}}},
		{name: "NUL in data kept", writes: []string{"data: a\x00b\n\n"},
			want: []event{{Data: "a\x00b", DataLen: 3}}},
		{name: "extra blank lines ignored", writes: []string{"\n\r\n\rdata: x\n\n\n\n"},
			want: []event{{Data: "x", DataLen: 1}}},
		{name: "several events in one write", writes: []string{"data: 1\n\ndata: 2\n\ndata: 3\n\n"},
			want: []event{{Data: "1", DataLen: 1}, {Data: "2", DataLen: 1}, {Data: "3", DataLen: 1}}},
		{name: "data truncated at the bound", max: 4, writes: []string{"data: abcdef\n\n"},
			want: []event{{Data: "abcd", DataLen: 6, Truncated: true}}},
		{name: "data exactly at the bound not truncated", max: 4, writes: []string{"data: abcd\n\n"},
			want: []event{{Data: "abcd", DataLen: 4}}},
		{name: "joining LF counts toward the bound", max: 4, writes: []string{"data: ab\ndata: cd\n\n"},
			want: []event{{Data: "ab\nc", DataLen: 5, Truncated: true}}},
		{name: "bound applies per event", max: 4, writes: []string{"data: abcdef\n\ndata: xy\n\n"},
			want: []event{{Data: "abcd", DataLen: 6, Truncated: true}, {Data: "xy", DataLen: 2}}},
		{name: "long event type truncated", writes: []string{"event: " + long + "\ndata: x\n\n"},
			want: []event{{Type: long[:MaxFieldBytes], Data: "x", DataLen: 1}}},
		{name: "long id truncated", writes: []string{"id: " + long + "\ndata: x\n\n"},
			want: []event{{ID: long[:MaxFieldBytes], Data: "x", DataLen: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{MaxEventBytes: tt.max}
			writes := make([][]byte, len(tt.writes))
			for i, w := range tt.writes {
				writes[i] = []byte(w)
			}
			checkEvents(t, "as written", decode(t, opts, writes...), tt.want)

			whole := bytes.Join(writes, nil)
			checkEvents(t, "reference decoder", referenceDecode(whole, tt.max), tt.want)
			checkSplitInvariance(t, opts, whole, tt.want)
		})
	}
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func eventTypes(events []event) []string {
	types := make([]string, len(events))
	for i, e := range events {
		types[i] = e.Type
	}
	return types
}

func TestFixtures(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, events []event)
	}{
		{file: "openai_chat_include_usage.sse", check: func(t *testing.T, events []event) {
			if got, want := len(events), 23; got != want {
				t.Fatalf("got %d events, want %d", got, want)
			}
			for i, e := range events {
				if e.Type != "" {
					t.Errorf("event %d: got type %q, want none", i, e.Type)
				}
			}
			if got, want := events[len(events)-1].Data, "[DONE]"; got != want {
				t.Errorf("last event: got data %q, want %q", got, want)
			}
			usage := events[len(events)-2].Data
			if want := `"choices":[],"usage":{"prompt_tokens":31,`; !strings.Contains(usage, want) {
				t.Errorf("usage event: got data %q, want it to contain %q", usage, want)
			}
		}},
		{file: "anthropic_messages.sse", check: func(t *testing.T, events []event) {
			want := []string{"message_start", "content_block_start", "ping", "content_block_delta",
				"content_block_delta", "content_block_stop", "content_block_start", "content_block_delta", "ping",
				"content_block_delta", "content_block_stop", "message_delta", "message_stop"}
			if got := eventTypes(events); !slices.Equal(got, want) {
				t.Errorf("got types %q, want %q", got, want)
			}
			for i, e := range events {
				if want := `"type"`; !strings.HasPrefix(e.Data, "{") || !strings.Contains(e.Data, want) {
					t.Errorf("event %d: got data %q, want a JSON object with %s", i, e.Data, want)
				}
			}
		}},
		{file: "gemini_stream_crlf.sse", check: func(t *testing.T, events []event) {
			if got, want := len(events), 3; got != want {
				t.Fatalf("got %d events, want %d", got, want)
			}
			for i, e := range events {
				if strings.ContainsAny(e.Data, "\r\n") || !strings.HasSuffix(e.Data, "}") {
					t.Errorf("event %d: got data %q, want one JSON line without CR or LF", i, e.Data)
				}
			}
			if want := `"totalTokenCount": 41`; !strings.Contains(events[2].Data, want) {
				t.Errorf("last event: got data %q, want it to contain %q", events[2].Data, want)
			}
		}},
		{file: "openai_responses_keepalive.sse", check: func(t *testing.T, events []event) {
			want := []string{"response.created", "response.in_progress", "response.output_item.added",
				"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
				"response.output_text.delta", "response.output_text.delta", "response.output_text.done",
				"response.completed"}
			if got := eventTypes(events); !slices.Equal(got, want) {
				t.Errorf("got types %q, want %q", got, want)
			}
		}},
		{file: "edge_cases.sse", check: func(t *testing.T, events []event) {
			checkEvents(t, "edge cases", events, []event{
				{Type: "first", Data: "one\ntwo", ID: "1", DataLen: 7},
				{Data: "\n two spaces", ID: "2", DataLen: 12},
				{Data: "after nul id", ID: "2", DataLen: 12},
				{Data: "\xff\xfe not utf-8 \xc3", DataLen: 14},
				{Data: "last", DataLen: 4},
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			input := readFixture(t, tt.file)
			events := decode(t, Options{}, input)
			tt.check(t, events)
			checkEvents(t, "reference decoder", referenceDecode(input, 0), events)
			checkSplitInvariance(t, Options{}, input, events)
		})
	}
}

// TestWriteDoesNotRetain overwrites each slice after Write: an event dispatched later
// must not see the change, also when its data was first referenced in place.
func TestWriteDoesNotRetain(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   []event
	}{
		{name: "whole data line then blank line", writes: []string{"data: abc\n", "\n"},
			want: []event{{Data: "abc", DataLen: 3}}},
		{name: "line without terminator", writes: []string{"data: abc", "\n\n"},
			want: []event{{Data: "abc", DataLen: 3}}},
		{name: "pending event after a dispatched one", writes: []string{"data: 1\n\ndata: 2", "3\n\n"},
			want: []event{{Data: "1", DataLen: 1}, {Data: "23", DataLen: 2}}},
		{name: "event type and id", writes: []string{"id: 9\nevent: e\ndata: d\n", "\n"},
			want: []event{{Type: "e", Data: "d", ID: "9", DataLen: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(Options{})
			var got []event
			for _, w := range tt.writes {
				p := []byte(w)
				d.Write(p, func(e Event) { got = append(got, copyEvent(e)) })
				for i := range p {
					p[i] = '#'
				}
			}
			checkEvents(t, "after overwriting", got, tt.want)
		})
	}
}

func TestReset(t *testing.T) {
	d := NewDecoder(Options{})
	var got []event
	collect := func(e Event) { got = append(got, copyEvent(e)) }
	d.Write([]byte("\xEF\xBB\xBFid: 1\nevent: e\ndata: partial\ndata: more"), collect)
	if d.Buffered() == 0 {
		t.Fatalf("Buffered() = 0 before Reset, want > 0")
	}
	d.Reset()
	if got := d.Buffered(); got != 0 {
		t.Errorf("Buffered() after Reset = %d, want 0", got)
	}
	// The BOM must be stripped again and nothing of the old stream may leak in.
	d.Write([]byte("\xEF\xBB\xBFdata: fresh\n\n"), collect)
	checkEvents(t, "after Reset", got, []event{{Data: "fresh", DataLen: 5}})
}

func TestZeroDecoder(t *testing.T) {
	var d Decoder
	var got []event
	d.Write([]byte("data: x\n\n"), func(e Event) { got = append(got, copyEvent(e)) })
	checkEvents(t, "zero Decoder", got, []event{{Data: "x", DataLen: 1}})
	if got, want := d.maxData, DefaultMaxEventBytes; got != want {
		t.Errorf("bound of the zero Decoder: got %d, want %d", got, want)
	}
}

func TestNilCallback(t *testing.T) {
	d := NewDecoder(Options{})
	d.Write([]byte("data: x\n\ndata: y"), nil)
	if got, want := d.Buffered(), 1; got != want {
		t.Errorf("Buffered() = %d, want %d", got, want)
	}
}

// patternLine returns n bytes of line content without CR or LF.
func patternLine(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

// feedChunks writes stream in chunks of size n and checks the bound after every Write.
func feedChunks(t *testing.T, d *Decoder, opts Options, stream []byte, n int, fn func(Event)) {
	t.Helper()
	for len(stream) > 0 {
		k := min(n, len(stream))
		d.Write(stream[:k], fn)
		stream = stream[k:]
		checkBuffered(t, d, opts)
	}
}

func TestLargeEventBounded(t *testing.T) {
	const size = 10 << 20
	payload := patternLine(size)
	stream := slices.Concat([]byte("event: response.completed\ndata: "), payload, []byte("\n\n"))
	opts := Options{}
	d := NewDecoder(opts)
	var got []event
	feedChunks(t, d, opts, stream, 64<<10, func(e Event) { got = append(got, copyEvent(e)) })
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	e := got[0]
	if !e.Truncated || e.DataLen != size || e.Type != "response.completed" {
		t.Errorf("got Truncated=%v DataLen=%d Type=%q, want Truncated=true DataLen=%d Type=%q",
			e.Truncated, e.DataLen, e.Type, size, "response.completed")
	}
	if len(e.Data) != DefaultMaxEventBytes || e.Data != string(payload[:DefaultMaxEventBytes]) {
		t.Errorf("got %d data bytes (prefix match %v), want the first %d bytes of the payload",
			len(e.Data), strings.HasPrefix(string(payload), e.Data), DefaultMaxEventBytes)
	}
	if got := d.Buffered(); got != 0 {
		t.Errorf("Buffered() after dispatch = %d, want 0", got)
	}
}

// TestEndlessLine feeds a 10 MB line that never ends, of every kind the decoder treats
// differently: memory must stay bounded whatever the line is.
func TestEndlessLine(t *testing.T) {
	const size = 10 << 20
	tests := []struct {
		name    string
		prefix  string
		maxHeld int
	}{
		{name: "data", prefix: "data: ", maxHeld: DefaultMaxEventBytes},
		{name: "comment", prefix: ": ", maxHeld: 0},
		{name: "event type", prefix: "event: ", maxHeld: MaxFieldBytes},
		{name: "id", prefix: "id: ", maxHeld: MaxFieldBytes},
		{name: "unknown field value", prefix: "retry: ", maxHeld: 0},
		{name: "field name", prefix: "", maxHeld: maxNameLen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{}
			d := NewDecoder(opts)
			events := 0
			stream := append([]byte(tt.prefix), patternLine(size)...)
			feedChunks(t, d, opts, stream, 64<<10, func(Event) { events++ })
			if events != 0 {
				t.Errorf("got %d events, want 0", events)
			}
			if got := d.Buffered(); got > tt.maxHeld {
				t.Errorf("Buffered() = %d, want <= %d", got, tt.maxHeld)
			}
		})
	}
}

func TestWriteAllocs(t *testing.T) {
	openai := bytes.Repeat(readFixture(t, "openai_chat_include_usage.sse"), 8)
	anthropic := bytes.Repeat(readFixture(t, "anthropic_messages.sse"), 8)
	large := slices.Concat([]byte("data: "), patternLine(2*DefaultMaxEventBytes), []byte("\n\n"))
	// A buffer grown past MaxKeptBytes is dropped after its event, so a
	// large event costs its buffer's growth again — a doubling at a time,
	// never an allocation per Write.
	growth := 0
	for c := 256; c < DefaultMaxEventBytes; c *= 2 {
		growth++
	}
	tests := []struct {
		name      string
		stream    []byte
		chunk     int
		maxAllocs int
	}{
		{name: "openai whole", stream: openai, chunk: len(openai)},
		{name: "openai 1KiB", stream: openai, chunk: 1 << 10},
		{name: "openai 7B", stream: openai, chunk: 7},
		{name: "anthropic 1KiB", stream: anthropic, chunk: 1 << 10},
		{name: "truncated event 16KiB", stream: large, chunk: 16 << 10, maxAllocs: growth + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(Options{})
			events := 0
			fn := func(Event) { events++ }
			run := func() {
				d.Reset()
				for p := tt.stream; len(p) > 0; {
					k := min(tt.chunk, len(p))
					d.Write(p[:k], fn)
					p = p[k:]
				}
			}
			run() // grow the buffers once
			writes := (len(tt.stream) + tt.chunk - 1) / tt.chunk
			if got := testing.AllocsPerRun(20, run); got > float64(tt.maxAllocs) {
				t.Errorf("got %v allocs per stream of %d writes, want at most %d", got, writes, tt.maxAllocs)
			}
			if events == 0 {
				t.Errorf("got 0 events, want some")
			}
		})
	}
}

// TestLargeEventBufferNotKept: the buffer a large event spanning Writes
// needed is read whole, then dropped, so a stream waiting for its next
// event holds at most MaxKeptBytes of buffer; a small event's is kept.
func TestLargeEventBufferNotKept(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		kept bool
	}{{"small", 1 << 10, true}, {"large", 4 * MaxKeptBytes, false}} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(Options{})
			stream := slices.Concat([]byte("data: "), patternLine(tc.size), []byte("\n\n"))
			var got int
			for p := stream; len(p) > 0; p = p[min(1000, len(p)):] {
				d.Write(p[:min(1000, len(p))], func(ev Event) { got = len(ev.Data) })
			}
			if got != tc.size {
				t.Fatalf("got an event of %d bytes, want %d", got, tc.size)
			}
			if c := cap(d.data); c > MaxKeptBytes || (c > 0) != tc.kept {
				t.Errorf("kept a buffer of %d bytes, want one only for a small event, of at most %d", c, MaxKeptBytes)
			}
		})
	}
}

// TestDataEventFastPath: an event that is one data line and its blank
// line, inside one Write, is dispatched by dataEvent, with what the
// line-by-line path gives; other lines are left to that path.
func TestDataEventFastPath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		fast  bool
	}{
		{"a data line", "data: {\"a\":1}\n\n", true},
		{"no space", "data:x\n\n", true},
		{"empty data", "data:\n\n", true},
		{"two spaces", "data:  x\n\n", true},
		{"two data lines", "data: x\ndata: y\n\n", false},
		{"CRLF", "data: x\r\n\r\n", false},
		{"CR before the blank line", "data: x\n\r\n", false},
		{"no colon", "data\n\n", false},
		{"another field", "datum: x\n\n", false},
		{"a comment", ": data: x\n\n", false},
		{"beyond the bound", "data: 0123456789\n\n", false},
	} {
		d := NewDecoder(Options{MaxEventBytes: 8})
		p := []byte(tc.input)
		end := bytes.IndexAny(p, "\r\n")
		fast := len(p)-end > 1 && p[end] == '\n' && p[end+1] == '\n' && d.dataEvent(p[:end], nil)
		if fast != tc.fast {
			t.Errorf("%s: dataEvent took %q: got %v, want %v", tc.name, tc.input, fast, tc.fast)
		}
		want := referenceDecode(p, 8)
		checkEvents(t, tc.name, decode(t, Options{MaxEventBytes: 8}, p), want)
		checkSplitInvariance(t, Options{MaxEventBytes: 8}, p, want)
	}
}
