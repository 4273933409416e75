package anthropic

import (
	"bytes"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// fixtureDeltas returns the content_block_delta events of the recorded
// streams.
func fixtureDeltas(t testing.TB) [][]byte {
	var deltas [][]byte
	for _, name := range []string{"messages_stream.sse", "messages_stream_cut.sse", "messages_stream_overloaded.sse", "messages_stream_tool_crlf.sse"} {
		for _, ev := range fixtureEvents(t, name) {
			if bytes.HasPrefix(ev, []byte(`{"type":"content_block_delta"`)) {
				deltas = append(deltas, ev)
			}
		}
	}
	return deltas
}

// TestExactDelta: every delta of the recorded streams, text, thinking,
// tool input and signature alike, is read by exactDelta; events of other
// shapes are left to the other paths.
func TestExactDelta(t *testing.T) {
	deltas := fixtureDeltas(t)
	if len(deltas) < 10 {
		t.Fatalf("got %d recorded deltas, want at least 10", len(deltas))
	}
	for _, ev := range deltas {
		if !NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}}).exactDelta(ev) {
			t.Errorf("exactDelta left %s to the other paths, want it read", ev)
		}
	}
	for _, tc := range []struct{ name, event string }{
		{"whitespace", `{"type": "content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}`},
		{"members in another order", `{"index":0,"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}`},
		{"a delta type of another kind", `{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}`},
		{"a second text", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}`},
		{"a text not a string", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":7}}`},
		{"a leading zero", `{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"a"}}`},
		{"cut", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}`},
		{"a text cut at an escaped quote", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"}}`},
		{"another event", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`},
	} {
		r := NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}})
		if r.exactDelta([]byte(tc.event)) {
			t.Errorf("%s: exactDelta read %s, want it left to the other paths", tc.name, tc.event)
		}
		if r.ObservedOutputTokens() != 0 {
			t.Errorf("%s: got %d observed after declining, want 0", tc.name, r.ObservedOutputTokens())
		}
		checkPaths(t, [][]byte{[]byte(tc.event)}, nil)
	}
}

// TestExactDeltaMutations: every recorded delta with one edit (every
// byte deleted, and bytes that change how JSON reads put in at every
// position) is read the same by every path.
func TestExactDeltaMutations(t *testing.T) {
	deltas := append(fixtureDeltas(t), []byte(`{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":"a \"b\"\n\\"}}`))
	for _, ev := range deltas {
		for i := range ev {
			checkPaths(t, [][]byte{append(bytes.Clone(ev[:i]), ev[i+1:]...)}, nil)
			for _, c := range []byte("\"\\ {}[],:0") {
				checkPaths(t, [][]byte{append(append(bytes.Clone(ev[:i]), c), ev[i:]...)}, nil)
			}
		}
	}
}
