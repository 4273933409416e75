package gemini

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
	"github.com/tokenwarden/tokenwarden/internal/sse"
)

// events are streamGenerateContent payloads, made from the names the
// reader reads.
var events = llmtest.Events{
	Keys: []string{"candidates", "content", "parts", "text", "functionCall", "name", "args", "finishReason", "finish_reason",
		"usageMetadata", "usage_metadata", "promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount",
		"cachedContentTokenCount", "toolUsePromptTokenCount", "error", "role"},
	Values: []string{`"STOP"`, `"model"`, `[{"text":"a part"},{"functionCall":{"name":"f","args":{}}}]`},
}

var sseFixtures = []string{"stream_sse_cached_tools.sse", "stream_sse_crlf.sse", "stream_sse_cut.sse", "stream_sse_error.sse"}

type pathStats struct{ fast, counted, usage int }

// checkPaths feeds each event to a reader that reads well-formed parts
// with the scanner and to one that reads everything with gjson, and
// requires the same state of them after each.
func checkPaths(t *testing.T, evs [][]byte, st *pathStats) {
	t.Helper()
	opts := llm.ReaderOptions{Counter: llmtest.Fingerprint{}}
	fast, ref := NewSSEReader("m", opts), NewSSEReader("m", opts)
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

func fixtureEvents(t testing.TB, name string) [][]byte {
	var evs [][]byte
	sse.NewDecoder(sse.Options{}).Write(fixtures.Read(t, name), func(ev sse.Event) { evs = append(evs, bytes.Clone(ev.Data)) })
	return evs
}

// TestStreamPathsAgree: on generated events and the recorded streams,
// the scanner reads what gjson reads.
func TestStreamPathsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	events := events
	for _, name := range sseFixtures {
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
	for _, name := range sseFixtures {
		checkPaths(t, fixtureEvents(t, name), &st)
	}
	t.Logf("scanner read %d events, counted text in %d, found usage in %d", st.fast, st.counted, st.usage)
	if st.fast < 1000 || st.counted < 50 || st.usage < 20 {
		t.Errorf("the scanner read %d events, counted text in %d and found usage in %d: the test reaches too little", st.fast, st.counted, st.usage)
	}
}

// FuzzStreamPaths holds the scanner to gjson's reading on any event.
func FuzzStreamPaths(f *testing.F) {
	for _, ev := range fixtureEvents(f, "stream_sse_cached_tools.sse") {
		f.Add(ev)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 30 {
		f.Add(events.Event(r))
	}
	f.Fuzz(func(t *testing.T, ev []byte) { checkPaths(t, [][]byte{ev}, nil) })
}

// TestEscapedTextAllocatesNothing: text parts with escapes are counted
// without allocating.
func TestEscapedTextAllocatesNothing(t *testing.T) {
	stream := []byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"line\\none \\\"q\\\"\"}],\"role\":\"model\"}}]}\r\n\r\n")
	r := NewSSEReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}})
	r.Write(stream)
	if n := testing.AllocsPerRun(50, func() { r.Write(stream) }); n != 0 {
		t.Errorf("got %v allocations per event, want 0", n)
	}
}
