package openai

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
	"github.com/tokenwarden/tokenwarden/internal/sse"
)

// sseEvents returns the data of the events of a recorded stream.
func sseEvents(t testing.TB, name string) [][]byte {
	t.Helper()
	var events [][]byte
	sse.NewDecoder(sse.Options{}).Write(fixtures.Read(t, name), func(ev sse.Event) {
		events = append(events, bytes.Clone(ev.Data))
	})
	return events
}

// chatSSEFixtures are the recorded streams whose events the chat reader
// reads.
var chatSSEFixtures = []string{"chat_include_usage.sse", "chat_stream_usage.sse", "chat_azure_content_filter.sse",
	"chat_groq.sse", "chat_vllm_continuous.sse", "chat_cut.sse", "chat_midstream_error.sse", "chat_no_usage.sse",
	"chat_vllm_error.sse"}

// newChunkReader returns a chat stream reader whose counts fingerprint
// the text they are given.
func newChunkReader() *StreamReader {
	return NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}}, ChatDeltaText)
}

// checkChunk holds scanChunk to the reading of the general fast path and
// of gjson on one event: when it reads the event, the event is
// well-formed, scanEvent reads it too, and the three leave the reader in
// the same state; when it does not, it has changed nothing.
func checkChunk(t *testing.T, ev []byte) {
	t.Helper()
	// What exact reads, members reads the same.
	if e := (chunkScan{b: ev}); e.exact() {
		m := chunkScan{b: ev}
		if !m.members() {
			t.Fatalf("exact read %q, members did not", ev)
		}
		eu, ep, eok := e.u.usage()
		mu, mp, mok := m.u.usage()
		if e.n != m.n || ep != mp || eu != mu || eok != mok {
			t.Fatalf("after %q: exact noted %d texts and usage %+v %v (readable %v), members %d and %+v %v (readable %v)", ev, e.n, eu, ep, eok, m.n, mu, mp, mok)
		}
		for i := range e.n {
			if !bytes.Equal(e.texts[i], m.texts[i]) {
				t.Fatalf("after %q: exact noted text %q, members %q", ev, e.texts[i], m.texts[i])
			}
		}
	}
	chunk := newChunkReader()
	if !chunk.scanChunk(ev) {
		if u, ok := chunk.Usage(); ok || chunk.ObservedOutputTokens() != 0 || chunk.Errored() {
			t.Fatalf("the fast path left %q to scanEvent but changed the reader: usage %+v %v, observed %d, errored %v",
				ev, u, ok, chunk.ObservedOutputTokens(), chunk.Errored())
		}
		return
	}
	if !llm.WellFormedObject(ev) {
		t.Fatalf("the fast path read %q, which is not well-formed", ev)
	}
	general, ref := newChunkReader(), newChunkReader()
	if !general.scanEvent(ev) {
		t.Fatalf("the fast path read %q, which scanEvent leaves to gjson", ev)
	}
	ref.gjsonEvent(ev)
	for _, other := range []struct {
		name string
		r    *StreamReader
	}{{"scanEvent", general}, {"gjson", ref}} {
		cu, cok := chunk.Usage()
		ou, ook := other.r.Usage()
		if cu != ou || cok != ook || chunk.Errored() != other.r.Errored() || chunk.ObservedOutputTokens() != other.r.ObservedOutputTokens() {
			t.Fatalf("after %q:\nscanChunk: usage %+v %v, errored %v, observed %d\n%s: usage %+v %v, errored %v, observed %d",
				ev, cu, cok, chunk.Errored(), chunk.ObservedOutputTokens(), other.name, ou, ook, other.r.Errored(), other.r.ObservedOutputTokens())
		}
	}
}

// TestChunkFastPath: every event of OpenAI's recorded streams but
// [DONE], the lifecycle's among them, is read by the chunk fast path, in
// OpenAI's exact shape.
func TestChunkFastPath(t *testing.T) {
	for _, name := range []string{"chat_include_usage.sse", "chat_stream_usage.sse"} {
		for _, ev := range sseEvents(t, name) {
			if bytes.Equal(ev, done) {
				continue
			}
			if c := (chunkScan{b: ev}); !c.exact() {
				t.Errorf("%s: exact left %q to members, want it read", name, ev)
			}
			if !newChunkReader().scanChunk(ev) {
				t.Errorf("%s: the fast path left %q to scanEvent, want it read", name, ev)
			}
			checkChunk(t, ev)
		}
	}
}

// TestChunkDeclines: events the fast path cannot prove it reads as
// scanEvent does are left to it, whatever they hold.
func TestChunkDeclines(t *testing.T) {
	const (
		head   = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",`
		choice = `{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}`
	)
	deep := strings.Repeat("[", 63) + strings.Repeat("]", 63)
	for _, tc := range []struct{ name, event string }{
		{"whitespace between members", head + ` "choices":[` + choice + `]}`},
		{"whitespace after a colon", head + `"choices": [` + choice + `]}`},
		{"whitespace after the event", head + `"choices":[` + choice + "]}\n"},
		{"whitespace before the event", " " + head + `"choices":[` + choice + `]}`},
		{"an escaped key", head + `"ch\u006fices":[` + choice + `]}`},
		{"an escaped usage key", head + `"choices":[],"us\u0061ge":{"prompt_tokens":1}}`},
		{"an escaped content key", head + `"choices":[{"delta":{"con\u0074ent":"hi"}}]}`},
		{"choices twice", head + `"choices":[` + choice + `],"choices":[]}`},
		{"usage twice", head + `"choices":[],"usage":null,"usage":{"prompt_tokens":1}}`},
		{"object twice", head + `"object":"chat.completion.chunk","choices":[]}`},
		{"an error object", `{"object":"error","message":"overloaded"}`},
		{"another object", `{"object":"chat.completion","choices":[]}`},
		{"an error member", head + `"choices":[],"error":{"message":"overloaded"}}`},
		{"a type member", head + `"type":"error","choices":[]}`},
		{"x_groq", head + `"choices":[],"x_groq":{"usage":{"prompt_tokens":1}}}`},
		{"a top-level delta", head + `"delta":"hi"}`},
		{"choices an object", head + `"choices":{"a":` + choice + `}}`},
		{"a choice not an object", head + `"choices":["hi"]}`},
		{"a delta not an object", head + `"choices":[{"delta":"hi"}]}`},
		{"a second delta", head + `"choices":[{"delta":{},"delta":{"content":"hi"}}]}`},
		{"a second function", head + `"choices":[{"delta":{"tool_calls":[{"function":{},"function":{"arguments":"x"}}]}}]}`},
		{"a second arguments", head + `"choices":[{"delta":{"function_call":{"arguments":"x","arguments":"y"}}}]}`},
		{"tool calls not an array", head + `"choices":[{"delta":{"tool_calls":"x"}}]}`},
		{"too many texts", head + `"choices":[{"delta":{"content":"a","content":"b","content":"c","content":"d","content":"e",` +
			`"content":"f","content":"g","content":"h","content":"i"}}]}`},
		{"nested past the scanner's depth", head + `"choices":[{"logprobs":` + deep + `}]}`},
		{"a key cut short", head + `"choices":[],"`},
		{"a system_fingerprint look-alike", head + `"system_fingerprinted":"x","choices":[]}`},
		{"a reasoning_content look-alike", head + `"choices":[{"delta":{"reasoning_contents":"x"}}]}`},
		{"a reasoning_tokens look-alike", head + `"choices":[],"usage":{"prompt_tokens":1,"completion_tokens_details":{"reasoning_tokenz":1}}}`},
		{"a usage details look-alike", head + `"choices":[],"usage":{"prompt_tokens_detailz":{"cached_tokens":1}}}`},
		{"an escaped usage count", head + `"choices":[],"usage":{"prompt_tok\u0065ns":1}}`},
		{"whitespace in usage", head + `"choices":[],"usage":{"prompt_tokens": 1}}`},
		// Usage the reader finds unreadable (see readUsage): scanEvent
		// leaves it to gjson, which says so.
		{"absurd usage", head + `"choices":[],"usage":{"prompt_tokens":-5,"completion_tokens":1e400}}`},
		{"usage counts twice", head + `"choices":[],"usage":{"prompt_tokens":5,"input_tokens":7,"completion_tokens":1,"output_tokens":3}}`},
		{"usage details twice", head + `"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":4},` +
			`"prompt_tokens_details":null,"completion_tokens_details":{"audio_tokens":3},"output_tokens_details":{"reasoning_tokens":2}}}`},
		{"usage detail counts twice", head + `"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":` +
			`{"cached_tokens":4,"cached_tokens":5,"audio_tokens":1,"audio_tokens":2}}}`},
		{"usage counts of other kinds", head + `"choices":[],"usage":{"prompt_tokens":"12","completion_tokens":null,` +
			`"prompt_tokens_details":[],"completion_tokens_details":{"audio_tokens":{"a":1}}}}`},
		{"malformed", head + `"choices":[` + choice + `]`},
		{"a trailing comma", head + `"choices":[` + choice + `,]}`},
		{"a fraction skipped by the scanner, then nothing", head + `"choices":[],"created":1.5`},
	} {
		r := newChunkReader()
		if r.scanChunk([]byte(tc.event)) {
			t.Errorf("%s: the fast path read %s, want it left to scanEvent", tc.name, tc.event)
		}
		if u, ok := r.Usage(); ok || r.ObservedOutputTokens() != 0 {
			t.Errorf("%s: got usage %+v %v and %d observed after declining, want nothing", tc.name, u, ok, r.ObservedOutputTokens())
		}
		checkChunk(t, []byte(tc.event))
	}
}

// TestChunkReads: the shapes of chunk the fast path reads, beyond the
// recorded streams', read as scanEvent and gjson read them.
func TestChunkReads(t *testing.T) {
	const head = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",`
	for _, tc := range []struct{ name, event string }{
		{"escaped text", head + `"choices":[{"index":0,"delta":{"content":"a \"quote\"\n\u00e9 \\"}}]}`},
		{"tool calls", head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",` +
			`"function":{"name":"f","arguments":"{\"city\":\"Paris\"}"}},{"index":1,"function":{"arguments":"{}"}}]}}]}`},
		{"a function call", head + `"choices":[{"delta":{"function_call":{"name":"f","arguments":"{}"}}}]}`},
		{"reasoning and refusal", head + `"choices":[{"delta":{"reasoning_content":"r","reasoning":"s","refusal":"no"}}]}`},
		{"texts of other kinds", head + `"choices":[{"delta":{"content":null,"refusal":7,"reasoning":{"a":[1]}}}]}`},
		{"two choices", head + `"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`},
		{"logprobs", head + `"choices":[{"delta":{"content":"a"},"logprobs":{"content":[{"token":"a","logprob":-0.1,"bytes":[97]}]}}]}`},
		{"Azure's content filter results", head + `"choices":[{"delta":{"content":"a"},"content_filter_results":{"hate":{"filtered":false}}}]}`},
		{"usage", head + `"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}`},
		{"usage not an object", head + `"choices":[],"usage":7}`},
		{"usage in the Responses API's names", head + `"choices":[],"usage":{"input_tokens":5,"output_tokens":2,` +
			`"input_tokens_details":{"cached_tokens":1,"audio_tokens":2},"output_tokens_details":{"audio_tokens":1,"reasoning_tokens":1}}}`},
		{"usage without counts", head + `"choices":[],"usage":{"total_tokens":5}}`},
		{"usage empty", head + `"choices":[],"usage":{}}`},
		{"usage counts beyond int64", head + `"choices":[],"usage":{"prompt_tokens":1.5e308,"completion_tokens":9223372036854775808,` +
			`"prompt_tokens_details":{"cached_tokens":1e400}}}`},
		{"members in another order", `{"choices":[{"delta":{"content":"x"}}],"model":"m","object":"chat.completion.chunk"}`},
		{"other members", head + `"stop_reason":null,"extra":{"a":[true,false]},"choices":[{"delta":{"content":"x","role":"assistant"},"stop_reason":"s"}]}`},
		{"a system fingerprint of null", head + `"system_fingerprint":null,"choices":[]}`},
		{"nested up to the scanner's depth", head + `"choices":[{"logprobs":` + strings.Repeat("[", 62) + strings.Repeat("]", 62) + `}]}`},
	} {
		r := newChunkReader()
		if !r.scanChunk([]byte(tc.event)) {
			t.Errorf("%s: the fast path left %s to scanEvent, want it read", tc.name, tc.event)
		}
		checkChunk(t, []byte(tc.event))
	}
}

// chunkMutations returns ev with one edit each: every byte deleted, and
// bytes that change how JSON reads (a quote, a backslash, a space, a
// bracket, a comma, a digit) put in at every position.
func chunkMutations(ev []byte) [][]byte {
	var out [][]byte
	for i := range ev {
		out = append(out, append(bytes.Clone(ev[:i]), ev[i+1:]...))
		for _, c := range []byte("\"\\ {}[],:0") {
			out = append(out, append(append(bytes.Clone(ev[:i]), c), ev[i:]...))
		}
	}
	return out
}

// TestChunkMutations: every event of the recorded chat streams with one
// edit, read the same by the fast path, scanEvent and gjson.
func TestChunkMutations(t *testing.T) {
	events := sseEvents(t, "chat_stream_usage.sse")
	events = append(events, []byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,`+
		`"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":1}"}}],"refusal":"no"}}],"usage":null}`))
	for _, ev := range events {
		for _, m := range chunkMutations(ev) {
			checkChunk(t, m)
		}
	}
}

// TestChunkGenerated: events of the kind TestStreamPathsAgree generates
// (some of them chunks the fast path reads), read the same by the three.
func TestChunkGenerated(t *testing.T) {
	g := eventGen{rand.New(rand.NewPCG(5, 6))}
	read := 0
	for range 5000 {
		ev := g.event()
		if newChunkReader().scanChunk(ev) {
			read++
		}
		checkChunk(t, ev)
	}
	if read == 0 {
		t.Error("the fast path read none of the generated events, want some")
	}
}

// FuzzChunkPaths holds the chunk fast path to scanEvent's and gjson's
// reading on any event.
func FuzzChunkPaths(f *testing.F) {
	for _, name := range chatSSEFixtures {
		for _, ev := range sseEvents(f, name) {
			f.Add(ev)
		}
	}
	g := eventGen{rand.New(rand.NewPCG(7, 8))}
	for range 50 {
		f.Add(g.event())
	}
	f.Fuzz(func(t *testing.T, ev []byte) { checkChunk(t, ev) })
}
