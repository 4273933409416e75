package bedrock

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/eventstream"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// deltas are contentBlockDelta payloads, made from the names the reader
// reads.
var deltas = llmtest.Events{
	Keys:   []string{"delta", "text", "toolUse", "input", "reasoningContent", "signature", "contentBlockIndex", "p"},
	Values: []string{`{"text":"a text"}`, `{"toolUse":{"input":"{\"a\":1}"}}`, `{"reasoningContent":{"text":"think"}}`},
}

// fixtureDeltas are the contentBlockDelta payloads of the recorded
// streams.
func fixtureDeltas(t testing.TB) [][]byte {
	var out [][]byte
	for _, name := range []string{"converse_stream.eventstream", "converse_stream_tool.eventstream"} {
		d := eventstream.NewDecoder(eventstream.Options{})
		_ = d.Write(fixtures.Read(t, name), func(m *eventstream.Message) {
			if typ, _, _ := m.Header(":event-type"); string(typ) == "contentBlockDelta" {
				out = append(out, bytes.Clone(m.Payload))
			}
		})
	}
	return out
}

// checkPaths reads each payload with the scanner where it can and with
// gjson alone, and requires the same count of them.
func checkPaths(t *testing.T, payloads [][]byte) (counted int) {
	t.Helper()
	opts := llm.ReaderOptions{Counter: llmtest.Fingerprint{}}
	fast, ref := NewStreamReader("m", opts), NewStreamReader("m", opts)
	for _, p := range payloads {
		before := fast.ObservedOutputTokens()
		fast.readDelta(p, true)
		ref.readDelta(p, false)
		if fast.ObservedOutputTokens() != ref.ObservedOutputTokens() {
			t.Fatalf("after %q: scanner observed %d, gjson %d", p, fast.ObservedOutputTokens(), ref.ObservedOutputTokens())
		}
		if llm.WellFormedObject(p) && fast.ObservedOutputTokens() != before {
			counted++
		}
	}
	return counted
}

// TestDeltaPathsAgree: on generated payloads and the recorded ones, the
// scanner counts what gjson counts.
func TestDeltaPathsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	deltas := deltas
	deltas.Seeds = fixtureDeltas(t)
	counted := checkPaths(t, deltas.Seeds)
	for range 4000 {
		counted += checkPaths(t, [][]byte{deltas.Event(r)})
	}
	if counted < 500 {
		t.Errorf("the scanner counted text in %d payloads: the test reaches too little", counted)
	}
}

// FuzzDeltaPaths holds the scanner to gjson's reading on any payload.
func FuzzDeltaPaths(f *testing.F) {
	for _, p := range fixtureDeltas(f) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p []byte) { checkPaths(t, [][]byte{p}) })
}

// TestEscapedTextAllocatesNothing: deltas with escapes are counted
// without allocating.
func TestEscapedTextAllocatesNothing(t *testing.T) {
	r := NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}})
	p := []byte(`{"contentBlockIndex":0,"delta":{"text":"line\none \"q\""}}`)
	if n := testing.AllocsPerRun(50, func() { r.readDelta(p, true) }); n != 0 {
		t.Errorf("got %v allocations per delta, want 0", n)
	}
}
