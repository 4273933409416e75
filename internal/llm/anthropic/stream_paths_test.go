package anthropic

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
	"github.com/tokenwarden/tokenwarden/internal/sse"
)

// events are Messages stream payloads, made from the names the reader
// reads.
var events = llmtest.Events{
	Keys: []string{"type", "delta", "text", "thinking", "partial_json", "message", "usage", "index", "error",
		"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
		"cache_creation", "ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"},
	Values: []string{`"content_block_delta"`, `"message_start"`, `"message_delta"`, `"error"`, `"ping"`,
		`"text_delta"`, `"thinking_delta"`, `"input_json_delta"`, `"signature_delta"`},
}

// pathStats counts what the fast path did, so that a test can tell it
// was exercised.
type pathStats struct{ fast, counted, usage int }

// checkPaths feeds each event to a reader that reads well-formed deltas
// with the scanner and to one that reads everything with gjson, and
// requires the same state of them after each.
func checkPaths(t *testing.T, evs [][]byte, st *pathStats) {
	t.Helper()
	opts := llm.ReaderOptions{Counter: llmtest.Fingerprint{}}
	fast, ref := NewStreamReader("m", opts), NewStreamReader("m", opts)
	for _, ev := range evs {
		observed := fast.ObservedOutputTokens()
		_, had := fast.Usage()
		fast.readEvent(ev, true)
		ref.readEvent(ev, false)
		fu, fok := fast.Usage()
		ru, rok := ref.Usage()
		if fu != ru || fok != rok || fast.Errored() != ref.Errored() || fast.ObservedOutputTokens() != ref.ObservedOutputTokens() {
			t.Fatalf("after %q:\nscanner: usage %+v %v, errored %v, observed %d\ngjson:   usage %+v %v, errored %v, observed %d",
				ev, fu, fok, fast.Errored(), fast.ObservedOutputTokens(), ru, rok, ref.Errored(), ref.ObservedOutputTokens())
		}
		if st != nil && llm.WellFormedObject(ev) {
			st.fast++
			if fast.ObservedOutputTokens() != observed {
				st.counted++
			}
			if fok && !had {
				st.usage++
			}
		}
	}
}

// TestStreamPathsAgree: on generated events and the recorded streams,
// the scanner reads what gjson reads.
func TestStreamPathsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	events := events
	for _, name := range []string{"messages_stream.sse", "messages_stream_tool_crlf.sse"} {
		events.Seeds = append(events.Seeds, fixtureEvents(t, name)...)
	}
	var st pathStats
	for range 4000 {
		var evs [][]byte
		for range 1 + r.IntN(4) {
			evs = append(evs, events.Event(r))
		}
		checkPaths(t, evs, &st)
	}
	for _, name := range []string{"messages_stream.sse", "messages_stream_cut.sse", "messages_stream_overloaded.sse", "messages_stream_tool_crlf.sse"} {
		checkPaths(t, fixtureEvents(t, name), &st)
	}
	t.Logf("scanner read %d events, counted text in %d, found usage in %d", st.fast, st.counted, st.usage)
	if st.fast < 1000 || st.counted < 50 || st.usage < 20 {
		t.Errorf("the scanner read %d events, counted text in %d and found usage in %d: the test reaches too little", st.fast, st.counted, st.usage)
	}
}

func fixtureEvents(t testing.TB, name string) [][]byte {
	var evs [][]byte
	sse.NewDecoder(sse.Options{}).Write(fixtures.Read(t, name), func(ev sse.Event) { evs = append(evs, bytes.Clone(ev.Data)) })
	return evs
}

// FuzzStreamPaths holds the scanner to gjson's reading on any event.
func FuzzStreamPaths(f *testing.F) {
	for _, ev := range fixtureEvents(f, "messages_stream.sse") {
		f.Add(ev)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 30 {
		f.Add(events.Event(r))
	}
	f.Fuzz(func(t *testing.T, ev []byte) { checkPaths(t, [][]byte{ev}, nil) })
}

// TestEscapedTextAllocatesNothing: text deltas with escapes are counted
// without allocating.
func TestEscapedTextAllocatesNothing(t *testing.T) {
	stream := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"line\\none \\\"q\\\"\"}}\n\n")
	r := NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}})
	r.Write(stream)
	if n := testing.AllocsPerRun(50, func() { r.Write(stream) }); n != 0 {
		t.Errorf("got %v allocations per event, want 0", n)
	}
}
