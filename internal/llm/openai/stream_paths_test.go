package openai

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
	"github.com/tokenwarden/tokenwarden/internal/sse"
)

var deltaTexts = []struct {
	name string
	text DeltaText
}{{"chat", ChatDeltaText}, {"completions", CompletionsDeltaText}, {"responses", ResponsesDeltaText}}

// checkPaths feeds each event to a reader that takes the fast path where
// it can and to one that always takes gjson's, and requires the same
// state of them after every event: usage, errors and counted output.
func checkPaths(t *testing.T, events [][]byte) {
	t.Helper()
	for _, dt := range deltaTexts {
		opts := llm.ReaderOptions{Counter: llmtest.Fingerprint{}}
		fast, ref := NewStreamReader("m", opts, dt.text), NewStreamReader("m", opts, dt.text)
		for _, ev := range events {
			fast.onEvent(sse.Event{Data: ev, DataLen: len(ev)})
			if !bytes.Equal(ev, done) {
				ref.gjsonEvent(ev)
			}
			fu, fok := fast.Usage()
			ru, rok := ref.Usage()
			if fu != ru || fok != rok || fast.Errored() != ref.Errored() || fast.ObservedOutputTokens() != ref.ObservedOutputTokens() {
				t.Fatalf("%s: after %q:\nfast path: usage %+v %v, errored %v, observed %d\ngjson:     usage %+v %v, errored %v, observed %d",
					dt.name, ev, fu, fok, fast.Errored(), fast.ObservedOutputTokens(), ru, rok, ref.Errored(), ref.ObservedOutputTokens())
			}
		}
	}
}

// eventGen builds events from the shapes the readers meet and the odd
// ones gjson still reads: escapes in keys and texts, duplicate keys,
// values of the wrong type, choices as an object, nested usage.
type eventGen struct{ r *rand.Rand }

func (g eventGen) pick(vs ...string) string { return vs[g.r.IntN(len(vs))] }

func (g eventGen) text() string {
	return g.pick(`"plain words"`, `""`, `"line\nbreak \"quoted\" \u00e9 \ud83d\ude00"`, `"lone \ud83d surrogate"`,
		`"bad \x escape"`, "\"raw \x01 control\"", "\"raw \x01 and an escape \\n\"", `"\u12"`, `"\uZZZZ"`, `null`, `7`, `{"x":"y"}`, `["a"]`, `true`)
}

func (g eventGen) key(name string) string {
	if g.r.IntN(8) == 0 && len(name) > 1 {
		// The same key, one letter escaped.
		return `"` + name[:1] + fmt.Sprintf(`\u%04x`, name[1]) + name[2:] + `"`
	}
	return `"` + name + `"`
}

func (g eventGen) object(members ...string) string {
	sep := g.pick(",", " , ", ",\n  ")
	return "{" + strings.Join(members, sep) + "}"
}

func (g eventGen) member(name, value string) string {
	return g.key(name) + g.pick(":", " : ") + value
}

func (g eventGen) delta() string {
	var ms []string
	for range g.r.IntN(4) {
		switch g.r.IntN(7) {
		case 0, 1:
			ms = append(ms, g.member(g.pick("content", "reasoning_content", "reasoning", "refusal", "role"), g.text()))
		case 2:
			var calls []string
			for range g.r.IntN(3) {
				calls = append(calls, g.pick(
					g.object(g.member("index", "0"), g.member("function", g.object(g.member("name", `"f"`), g.member("arguments", g.text())))),
					g.object(g.member("function", "1"), g.member("function", g.object(g.member("arguments", g.text())))),
					g.object(g.member("function", g.object(g.member("a", "1"))), g.member("function", g.object(g.member("arguments", g.text())))),
					g.object(g.member("function", "["+g.object(g.member("arguments", g.text()))+"]")),
					g.text()))
			}
			ms = append(ms, g.member("tool_calls", g.pick("["+strings.Join(calls, ",")+"]", g.object(), g.text())))
		case 3:
			ms = append(ms, g.member("function_call", g.pick(g.object(g.member("arguments", g.text())), g.text())))
		default:
			ms = append(ms, g.member("other", g.text()))
		}
	}
	return g.object(ms...)
}

func (g eventGen) choice() string {
	var ms []string
	for range 1 + g.r.IntN(3) {
		switch g.r.IntN(4) {
		case 0:
			ms = append(ms, g.member("index", "0"))
		case 1:
			ms = append(ms, g.member("text", g.text()))
		default:
			ms = append(ms, g.member("delta", g.pick(g.delta(), g.delta(), g.text())))
		}
	}
	return g.pick(g.object(ms...), g.object(ms...), g.text())
}

func (g eventGen) usage() string {
	return g.pick(`null`, `7`, g.object(
		g.member(g.pick("prompt_tokens", "input_tokens"), g.pick("12", "1e3", "-4", "2.5", `"9"`, "null")),
		g.member(g.pick("completion_tokens", "output_tokens"), g.pick("30", "0", "1e400")),
		g.member(g.pick("prompt_tokens_details", "input_tokens_details"), g.pick(g.object(g.member("cached_tokens", "5")),
			g.object(g.member("audio_tokens", g.pick("3", "1e30", `"4"`)), g.member("cached_tokens", "2")), "null", "[]")),
		g.member(g.pick("completion_tokens_details", "output_tokens_details"), g.pick(g.object(g.member("audio_tokens", g.pick("6", "-1", "1e30"))),
			g.object(g.member("reasoning_tokens", "8")), "null")),
	), g.object())
}

func (g eventGen) event() []byte {
	var ms []string
	for range 1 + g.r.IntN(6) {
		switch g.r.IntN(9) {
		case 0:
			ms = append(ms, g.member("id", `"chatcmpl-1"`))
		case 1:
			ms = append(ms, g.member(g.pick("object", "type"), g.pick(`"chat.completion.chunk"`, `"error"`, `"err\u006fr"`,
				`"response.output_text.delta"`, `"response.audio.delta"`, `"response.reasoning_summary_text.delta"`, `"x.delta"`, `3`)))
		case 2, 3:
			var cs []string
			for range g.r.IntN(3) {
				cs = append(cs, g.choice())
			}
			ms = append(ms, g.member("choices", g.pick("["+strings.Join(cs, ",")+"]", `{"a":`+g.choice()+`}`, g.text(), "[]")))
		case 4:
			ms = append(ms, g.member("usage", g.usage()))
		case 5:
			ms = append(ms, g.member(g.pick("response", "x_groq"), g.object(g.member("usage", g.usage()), g.member("usage", g.usage()))))
		case 6:
			ms = append(ms, g.member("error", g.pick(`{"message":"overloaded"}`, `null`)))
		case 7:
			ms = append(ms, g.member("delta", g.text()))
		default:
			ms = append(ms, g.member("obfuscation", g.text()))
		}
	}
	ev := g.pick("", " ", "\n") + g.object(ms...) + g.pick("", " ", "\r\n")
	if g.r.IntN(10) == 0 {
		// Malformed: both readers take gjson's path.
		ev = ev[:g.r.IntN(len(ev))]
	}
	return []byte(ev)
}

// TestStreamPathsAgree: on thousands of generated events, every reader
// reports after each event exactly what gjson's reading gives.
func TestStreamPathsAgree(t *testing.T) {
	g := eventGen{rand.New(rand.NewPCG(10, 1))}
	for range 3000 {
		var events [][]byte
		for range 1 + g.r.IntN(4) {
			events = append(events, g.event())
		}
		checkPaths(t, events)
	}
}

// TestStreamFixturesTakeFastPath: the events of the recorded streams are
// well-formed and all read by the fast path.
func TestStreamFixturesTakeFastPath(t *testing.T) {
	for _, name := range []string{"chat_include_usage.sse", "chat_stream_usage.sse", "chat_azure_content_filter.sse",
		"chat_groq.sse", "chat_vllm_continuous.sse", "completions_stream.sse", "responses_keepalive.sse"} {
		var events [][]byte
		sse.NewDecoder(sse.Options{}).Write(fixtures.Read(t, name), func(ev sse.Event) {
			events = append(events, bytes.Clone(ev.Data))
		})
		r := NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}}, ChatDeltaText)
		for _, ev := range events {
			if !bytes.Equal(ev, done) && !r.scanEvent(ev) {
				t.Errorf("%s: the fast path left %q to gjson", name, ev)
			}
		}
		checkPaths(t, events)
	}
}

// FuzzStreamPaths holds the fast path to gjson's reading on any event.
func FuzzStreamPaths(f *testing.F) {
	g := eventGen{rand.New(rand.NewPCG(3, 4))}
	for range 50 {
		f.Add(g.event())
	}
	f.Fuzz(func(t *testing.T, ev []byte) { checkPaths(t, [][]byte{ev}) })
}

// TestEscapedTextAllocatesNothing: text with escapes (newlines, quotes,
// tool-call arguments that are JSON themselves), the common case of real
// output, is decoded without allocating once the reader is warm.
func TestEscapedTextAllocatesNothing(t *testing.T) {
	stream := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"line one\\nline \\\"two\\\" \\u00e9\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]}}]}\n\n")
	r := NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}}, ChatDeltaText)
	r.Write(stream)
	if n := testing.AllocsPerRun(50, func() { r.Write(stream) }); n != 0 {
		t.Errorf("got %v allocations per body, want 0", n)
	}
	if r.ObservedOutputTokens() == 0 {
		t.Error("nothing was counted")
	}
}
