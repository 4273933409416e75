package openai

import (
	"bytes"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

var responsesSSEFixtures = []string{"responses_keepalive.sse", "responses_failed.sse", "responses_incomplete.sse"}

func newResponsesReader() *StreamReader {
	return NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}}, ResponsesDeltaText)
}

// checkTextDelta holds scanTextDelta to scanEvent's and gjson's reading
// of one event, as checkChunk does scanChunk.
func checkTextDelta(t *testing.T, ev []byte) {
	t.Helper()
	fast := newResponsesReader()
	if !fast.scanTextDelta(ev) {
		if u, ok := fast.Usage(); ok || fast.ObservedOutputTokens() != 0 || fast.Errored() {
			t.Fatalf("scanTextDelta left %q to scanEvent but changed the reader: usage %+v %v, observed %d, errored %v",
				ev, u, ok, fast.ObservedOutputTokens(), fast.Errored())
		}
		return
	}
	if !llm.WellFormedObject(ev) {
		t.Fatalf("scanTextDelta read %q, which is not well-formed", ev)
	}
	general, ref := newResponsesReader(), newResponsesReader()
	if !general.scanEvent(ev) {
		t.Fatalf("scanTextDelta read %q, which scanEvent leaves to gjson", ev)
	}
	ref.gjsonEvent(ev)
	for _, other := range []struct {
		name string
		r    *StreamReader
	}{{"scanEvent", general}, {"gjson", ref}} {
		fu, fok := fast.Usage()
		ou, ook := other.r.Usage()
		if fu != ou || fok != ook || fast.Errored() != other.r.Errored() || fast.ObservedOutputTokens() != other.r.ObservedOutputTokens() {
			t.Fatalf("after %q:\nscanTextDelta: usage %+v %v, errored %v, observed %d\n%s: usage %+v %v, errored %v, observed %d",
				ev, fu, fok, fast.Errored(), fast.ObservedOutputTokens(), other.name, ou, ook, other.r.Errored(), other.r.ObservedOutputTokens())
		}
	}
}

// textDeltaEvents returns the output text deltas of the recorded
// Responses streams, and one with escapes and no obfuscation.
func textDeltaEvents(t testing.TB) [][]byte {
	var evs [][]byte
	for _, name := range responsesSSEFixtures {
		for _, ev := range sseEvents(t, name) {
			if bytes.HasPrefix(ev, []byte(`{"type":"response.output_text.delta"`)) {
				evs = append(evs, ev)
			}
		}
	}
	return append(evs, []byte(`{"type":"response.output_text.delta","sequence_number":12,"item_id":"msg_1","output_index":0,`+
		`"content_index":1,"delta":"a \"b\"\n\\","logprobs":[{"token":"a","logprob":-0.5}]}`))
}

// TestTextDeltaFastPath: the output text deltas of the recorded streams
// are read by scanTextDelta; other events and shapes are left to
// scanEvent.
func TestTextDeltaFastPath(t *testing.T) {
	evs := textDeltaEvents(t)
	if len(evs) < 5 {
		t.Fatalf("got %d recorded text deltas, want at least 5", len(evs))
	}
	for _, ev := range evs {
		if !newResponsesReader().scanTextDelta(ev) {
			t.Errorf("scanTextDelta left %s to scanEvent, want it read", ev)
		}
		checkTextDelta(t, ev)
	}
	for _, tc := range []struct{ name, event string }{
		{"another type", `{"type":"response.refusal.delta","sequence_number":3,"item_id":"m","output_index":0,"content_index":0,"delta":"no"}`},
		{"whitespace", `{"type":"response.output_text.delta", "sequence_number":3,"item_id":"m","output_index":0,"content_index":0,"delta":"a"}`},
		{"a delta not a string", `{"type":"response.output_text.delta","sequence_number":3,"item_id":"m","output_index":0,"content_index":0,"delta":7}`},
		{"a second delta", `{"type":"response.output_text.delta","sequence_number":3,"item_id":"m","output_index":0,"content_index":0,"delta":"a","delta":"b"}`},
		{"members in another order", `{"sequence_number":3,"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"a"}`},
		{"cut", `{"type":"response.output_text.delta","sequence_number":3,"item_id":"m","output_index":0,"content_index":0,"delta":"a"`},
	} {
		if newResponsesReader().scanTextDelta([]byte(tc.event)) {
			t.Errorf("%s: scanTextDelta read %s, want it left to scanEvent", tc.name, tc.event)
		}
		checkTextDelta(t, []byte(tc.event))
	}
}

// TestTextDeltaMutations: every text delta above with one edit, read the
// same by scanTextDelta, scanEvent and gjson.
func TestTextDeltaMutations(t *testing.T) {
	for _, ev := range textDeltaEvents(t) {
		for _, m := range chunkMutations(ev) {
			checkTextDelta(t, m)
		}
	}
}

// FuzzTextDeltaPaths holds scanTextDelta to scanEvent's and gjson's
// reading on any event.
func FuzzTextDeltaPaths(f *testing.F) {
	for _, name := range responsesSSEFixtures {
		for _, ev := range sseEvents(f, name) {
			f.Add(ev)
		}
	}
	f.Fuzz(func(t *testing.T, ev []byte) { checkTextDelta(t, ev) })
}
