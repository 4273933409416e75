package openai

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// shapeGen builds a chat body from fuzz bytes, by a grammar of the shapes
// exactChat reads and of the ways they go wrong: keys in other cases and
// escaped, every kind of space (and what is not JSON space), scalars and
// values good and bad, parts, nesting at the depth limit, and a byte
// changed, cut or dropped.
type shapeGen struct {
	b []byte
	i int
}

// n returns the next fuzz byte modulo k, or 0 once they run out.
func (g *shapeGen) n(k int) int {
	if g.i >= len(g.b) {
		return 0
	}
	v := int(g.b[g.i])
	g.i++
	return v % k
}

func (g *shapeGen) pick(xs []string) string { return xs[g.n(len(xs))] }

var shapeSpace = []string{"", "", "", "", "", " ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x00", "\u00a0", " \n "}

var shapeTopKeys = []string{"model", "messages", "stream", "n", "max_tokens", "max_completion_tokens", "stream_options",
	"tools", "functions", "reasoning_effort", "service_tier", "temperature", "metadata", "", "mmmmmmmm", "messagesX", "messageſ",
	"Model", "MODEL", "ſtream", "\\u212a", "k", "K", "m\\u006fdel", "model ", "12345678", "_", "max_to\\u212aens", "n\\u0000",
	"Messages", "STREAM", "include_usage", "role", "content"}

var shapeMessageKeys = []string{"role", "name", "content", "content", "role", "x", "tool_call_id", "Content", "ROLE", "naMe",
	"conte\\u006et", "", "12345678", "contents", "rolE", "tool_calls", "refusal", "audio", "function_call", "n\\u0061me", "\\u212a", "k", "prefix"}

var shapeScalars = []string{`"m"`, `""`, `"gpt-4o"`, `"o3"`, `"\u0067pt-4o"`, `"\ud800"`, `"a\"b"`, `"\\"`, "\"\xff\"", "\"\x01\"",
	`null`, `nul`, `true`, `false`, `tru`, `0`, `-0`, `1`, `5`, `128`, `129`, `1e2`, `1.0`, `1.5`, `-1`, `1e400`, `01`, `1.`, `-`, `9223372036854775808`,
	`"none"`, `"high"`, `"flex"`}

// shapeParts are content arrays of parts, good and bad.
var shapeParts = []string{`[]`, `[{"type":"text","text":"hi"}]`, `[{"text":"typed after","type":"text"}]`,
	`[{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]`, `[{"image_url":{"url":"u"},"type":"image_url"}]`,
	`[{"type":"image_url","image_url":"u"}]`, `[{"type":"text","text":"a","text":"b"}]`, `[{"type":"TEXT","text":"a"}]`,
	`[{"type":"t\u0065xt","text":"a"}]`, `[{"type":"text"}]`, `[{"type":"image_url","image_url":{"url":"u","URL":"v"}}]`,
	`["text"]`, `[{"type":"text","text":"a"},]`, `[{"type":"input_audio","input_audio":{}}]`}

var shapeValues = []string{`{}`, `[]`, `{"a":1}`, `{"a":1,"A":2}`, `{"k":1,"\u212a":2}`, `{"s":1,"ſ":2}`, `[1,2,{"a":[]}]`, `[1,]`, `{"a":}`,
	`{"include_usage":true}`, `{"include_usage":null}`, `{"INCLUDE_USAGE":true}`, `{"include_usage":true,"include_usage":false}`, `{"include_uſage":true}`,
	`{"include_usage":{}}`, `{"x":1}`, `[{"type":"text","text":"hi"}]`, `[{"type":"function"}]`,
	strings.Repeat("[", 509) + strings.Repeat("]", 509), strings.Repeat("[", 510) + strings.Repeat("]", 510),
	strings.Repeat("[", 511) + strings.Repeat("]", 511), strings.Repeat("[", 512) + strings.Repeat("]", 512)}

func (g *shapeGen) value() string {
	if g.n(3) == 0 {
		return g.pick(shapeValues)
	}
	return g.pick(shapeScalars)
}

func (g *shapeGen) message() string {
	if g.n(16) == 0 {
		return g.value()
	}
	var sb strings.Builder
	sb.WriteString("{" + g.pick(shapeSpace))
	members := g.n(5)
	for k := range members {
		if k > 0 {
			sb.WriteString("," + g.pick(shapeSpace))
		}
		key := g.pick(shapeMessageKeys)
		value := g.value()
		if key == "content" && g.n(3) == 0 {
			value = g.pick(shapeParts)
		}
		sb.WriteString(`"` + key + `"` + g.pick(shapeSpace) + ":" + g.pick(shapeSpace) + value + g.pick(shapeSpace))
	}
	sb.WriteString("}")
	return sb.String()
}

func (g *shapeGen) body() []byte {
	var sb strings.Builder
	sb.WriteString(g.pick(shapeSpace) + "{" + g.pick(shapeSpace))
	members := g.n(8)
	for k := range members {
		if k > 0 {
			sb.WriteString("," + g.pick(shapeSpace))
		}
		key := g.pick(shapeTopKeys)
		sb.WriteString(`"` + key + `"` + g.pick(shapeSpace) + ":" + g.pick(shapeSpace))
		if key == "messages" && g.n(8) != 0 {
			sb.WriteString("[" + g.pick(shapeSpace))
			for m := range g.n(6) * (1 + g.n(2)*g.n(20)) {
				if m > 0 {
					sb.WriteString("," + g.pick(shapeSpace))
				}
				sb.WriteString(g.message() + g.pick(shapeSpace))
			}
			sb.WriteString("]")
		} else {
			sb.WriteString(g.value())
		}
		sb.WriteString(g.pick(shapeSpace))
	}
	sb.WriteString("}" + g.pick(shapeSpace))
	out := []byte(sb.String())
	// An occasional byte-level change.
	switch g.n(8) {
	case 0:
		if len(out) > 0 {
			out = out[:g.n(256)*len(out)/256]
		}
	case 1:
		if len(out) > 0 {
			p := (g.n(256) * len(out)) / 256
			out = append(out[:p:p], append([]byte{byte(g.n(256))}, out[p:]...)...)
		}
	case 2:
		if len(out) > 1 {
			p := (g.n(256) * len(out)) / 256
			out = append(out[:p:p], out[p+1:]...)
		}
	}
	return out
}

// FuzzExactChatShapes builds bodies near the shapes exactChat reads (see
// shapeGen), which random bytes rarely reach: whatever exactChat takes,
// CheckBody accepts, and exactChat parses it as scanChat does.
func FuzzExactChatShapes(f *testing.F) {
	f.Add([]byte{3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 1, 2, 5, 0, 1, 2, 0, 1, 2, 0, 0})
	f.Add([]byte{2, 0, 0, 1, 0, 1, 0, 3, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, seed []byte) {
		body := (&shapeGen{b: seed}).body()
		if _, took, _ := exactChat(body, llmtest.ParseOptions()); took {
			if err := llm.CheckBody(body, chatFields); err != nil {
				t.Fatalf("%q: exactChat took a body CheckBody refuses: %v", body, err)
			}
		}
		if diff := compareChatParses(body); diff != "" {
			t.Fatalf("%q: %s", body, diff)
		}
	})
}
