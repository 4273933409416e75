package openai

import (
	"os"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// exactChatCases are bodies exactChat takes (take is set) or leaves to
// scanChat: each shape it reads, and each thing that makes it let go.
var exactChatCases = []struct {
	name, body string
	take       bool
}{
	{"model first", `{"model":"gpt-4o","messages":[{"role":"system","content":"be brief","name":"ops"},{"role":"user","content":"why"}]}`, true},
	{"model last, as the Python SDK sends it", `{"messages":[{"role":"user","content":"why"}],"model":"gpt-4o","stream":true}`, true},
	{"many messages", `{"messages":[` + strings.Repeat(`{"role":"user","content":"a turn of text","name":"n"},`, 40) + `{"role":"user","content":"end"}],"model":"o3"}`, true},
	{"space around every token", " {\n \"model\" : \"m\" ,\n \"messages\" : [ { \"role\" : \"user\" , \"content\" : \"x\" } , { } ] ,\t\"n\" : 2 } \n", true},
	{"options", `{"model":"gpt-5","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":100,"max_tokens":50,"n":3,"reasoning_effort":"high","service_tier":"flex"}`, true},
	{"empty stream_options", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{}}`, true},
	{"tools and unknown fields", `{"model":"m","temperature":0.5,"top_p":1e-1,"seed":-3,"user":"u","store":false,"metadata":{"a":[1,{"b":null}],"B":2},` +
		`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}],"functions":[{"name":"g"}],` +
		`"messages":[{"role":"tool","tool_call_id":"c1","content":"42"},{"role":"assistant","content":null,"prefix":true}]}`, true},
	{"escapes and non-ASCII", `{"model":"gpt-4o","messages":[{"role":"user","content":"\u0068\u0069 \"quoted\" \\ \ud83d\ude00 é 漢字\n"}]}`, true},
	{"empty", `{"model":"m","messages":[]}`, true},
	{"empty message", `{"model":"m","messages":[{}]}`, true},
	{"bad cap", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0}`, true},
	{"bad service tier", `{"model":"m","service_tier":1,"messages":[{"role":"user","content":"x"}]}`, true},
	{"stream a string", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":"yes"}`, true},
	{"no model", `{"messages":[{"role":"user","content":"x"}]}`, true},
	{"model a number", `{"model":4,"messages":[{"role":"user","content":"x"}]}`, true},
	{"stream_options null", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":null}`, true},

	{"content parts", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"text":"typed after","type":"text"},` +
		`{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}},{"image_url":{"detail":"high","url":"data:image/png;base64,iVBORw0KGgo="},"type":"image_url"},` +
		`{"type":"image_url","image_url":{"url":"https:\/\/x\/escaped.png"}}],"name":"n"},{"role":"user","content":[]}]}`, true},
	{"the lifecycle benchmark's body", "", true},
	{"a part of another type", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA"}}]}]}`, false},
	{"a part's type escaped", `{"model":"m","messages":[{"role":"user","content":[{"type":"t\u0065xt","text":"x"}]}]}`, false},
	{"a part without a type", `{"model":"m","messages":[{"role":"user","content":[{"text":"x"}]}]}`, false},
	{"a text part with an image", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","image_url":{"url":"u"}}]}]}`, false},
	{"an image part with text", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","text":"x","image_url":{"url":"u"}}]}]}`, false},
	{"a text part without text", `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, false},
	{"text null", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":null}]}]}`, false},
	{"an image without a URL", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"detail":"low"}}]}]}`, false},
	{"an image_url string", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":"https://x"}]}]}`, false},
	{"an image with more", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","x":1}}]}]}`, false},
	{"a part that is not an object", `{"model":"m","messages":[{"role":"user","content":["text"]}]}`, false},
	{"a part's key twice", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","text":"y"}]}]}`, false},
	{"an image's key twice", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","url":"v"}}]}]}`, false},
	{"a trailing comma in a message", `{"model":"m","messages":[{"role":"user",}]}`, false},
	{"a trailing comma in the body", `{"model":"m","messages":[],}`, false},
	{"a trailing comma in the messages", `{"model":"m","messages":[{},]}`, false},
	{"a trailing comma in the parts", `{"model":"m","messages":[{"content":[{"type":"text","text":"x"},]}]}`, false},
	{"a trailing comma in a part", `{"model":"m","messages":[{"content":[{"type":"text","text":"x",}]}]}`, false},
	{"a trailing comma in an image", `{"model":"m","messages":[{"content":[{"type":"image_url","image_url":{"url":"u",}}]}]}`, false},
	// From an adversarial review of the final pass.
	{"a message's other keys, as many as may be, and every field", `{"model":"m","messages":[{"role":"u","content":null,"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"tool_calls":[],"refusal":"r","audio":{},"function_call":null,"name":"q"}]}`, true},
	{"a message's other key too many", `{"model":"m","messages":[{"role":"u","content":null,"a":0,"b":0,"c":0,"d":0,"e":0,"f":0,"g":1}]}`, false},
	{"a Kelvin sign after k in a message", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"k\":1,\"\xe2\x84\xaa\":2}]}", false},
	{"space before a message field's colon", `{"model":"m","messages":[{"content" :"x","role" :"u","name" : "n"}]}`, true},
	{"an empty key", `{"model":"m","messages":[{"":1,"role":"u"}]}`, false},
	{"as deep as may be in a message's object", `{"model":"m","messages":[{"role":"u","content":"x","x":{"a":` + strings.Repeat("[", 508) + strings.Repeat("]", 508) + `}}]}`, true},
	{"too deep in a message's object", `{"model":"m","messages":[{"role":"u","content":"x","x":{"a":` + strings.Repeat("[", 509) + strings.Repeat("]", 509) + `}}]}`, false},
	{"messages closed by a brace", `{"model":"m","messages":[{}}}`, false},
	{"parts closed by a brace", `{"model":"m","messages":[{"content":[{"type":"text","text":"x"}}]}`, false},
	{"a message closed by a bracket", `{"model":"m","messages":[{"role":"user"]]}`, false},
	{"the body closed by a bracket", `{"model":"m","messages":[]]`, false},
	{"a trailing comma in stream_options", `{"model":"m","messages":[],"stream_options":{"include_usage":true,}}`, false},
	{"tool calls", `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"q\":1}"}}]},` +
		`{"role":"tool","tool_call_id":"a","content":"42"},{"role":"assistant","refusal":"no","audio":{"id":"x"},"function_call":{"name":"g"}}]}`, true},
	{"a tool call twice", `{"model":"m","messages":[{"role":"assistant","tool_calls":[],"tool_calls":[]}]}`, false},
	{"a tool call with a repeat inside", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","ID":"b"}]}]}`, false},
	{"content a number", `{"model":"m","messages":[{"role":"user","content":42}]}`, false},
	{"model first, counted as read", `{"model":"gpt-4o","messages":[` + strings.Repeat(`{"role":"user","name":"ann","content":"hi there"},`, 40) + `{}],"tools":[` + strings.Repeat(`{"type":"function","function":{"name":"f","parameters":{"type":"object"}}},`, 20) + `{}]}`, true},
	{"name null", `{"model":"m","messages":[{"role":"user","content":"x","name":null}]}`, false},
	{"upper-case key", `{"model":"m","messages":[{"role":"user","content":"x"}],"Temperature":1}`, false},
	{"key in another case", `{"model":"m","messages":[{"role":"user","Content":"x"}]}`, false},
	{"escaped key", `{"m\u006fdel":"m","messages":[{"role":"user","content":"x"}]}`, false},
	{"duplicate key", `{"model":"m","messages":[{"role":"user","content":"x","content":"y"}]}`, false},
	{"duplicate top-level key", `{"model":"m","model":"n","messages":[]}`, false},
	{"stream_options in another case", `{"model":"m","messages":[],"stream_options":{"INCLUDE_USAGE":true}}`, false},
	{"stream_options with an object, which finish refuses", `{"model":"m","messages":[],"stream_options":{"include_usage":{}}}`, true},
	{"a tool's schema with a repeat", `{"model":"m","messages":[],"tools":[{"type":"function","function":{"parameters":{"a":1,"\u0041":2}}}]}`, false},
	{"no messages", `{"model":"m"}`, false},
	{"messages an object", `{"model":"m","messages":{"role":"user"}}`, false},
	{"a message that is not an object", `{"model":"m","messages":["hi"]}`, false},
	{"bad UTF-8", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", false},
	{"bad escape", `{"model":"m","messages":[{"role":"user","content":"\x"}]}`, false},
	{"bad number", `{"model":"m","messages":[],"temperature":01}`, false},
	{"duplicate key in a tool", `{"model":"m","messages":[],"tools":[{"type":"a","TYPE":"b"}]}`, false},
	// The body itself is a level, and so are the messages array and a
	// message.
	{"too deep", `{"model":"m","messages":[],"metadata":` + strings.Repeat("[", 512) + strings.Repeat("]", 512) + `}`, false},
	{"as deep as may be", `{"model":"m","messages":[],"metadata":` + strings.Repeat("[", 511) + strings.Repeat("]", 511) + `}`, true},
	{"too deep in a message", `{"model":"m","messages":[{"x":` + strings.Repeat("[", 510) + strings.Repeat("]", 510) + `}]}`, false},
	{"as deep as may be in a message", `{"model":"m","messages":[{"x":` + strings.Repeat("[", 509) + strings.Repeat("]", 509) + `}]}`, true},
	{"something after", `{"model":"m","messages":[]}{}`, false},
	{"cut short", `{"model":"m","messages":[{"role":"user","content":"x"}`, false},
	{"too many keys", `{"model":"m","messages":[]` + manyKeys(30) + `}`, false},
}

// manyKeys returns n members ,"kN":N.
func manyKeys(n int) string {
	var sb strings.Builder
	for i := range n {
		sb.WriteString(`,"k` + itoa(i) + `":` + itoa(i))
	}
	return sb.String()
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// TestExactChat: exactChat takes the bodies it is for and leaves the
// rest, and what it takes it parses as scanChat does.
func TestExactChat(t *testing.T) {
	for _, tc := range exactChatCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.body == "" {
				b, err := os.ReadFile("../../../testdata/openai/chat_request.json")
				if err != nil {
					t.Fatal(err)
				}
				tc.body = string(b)
			}
			if _, took, _ := exactChat([]byte(tc.body), llmtest.ParseOptions()); took != tc.take {
				t.Errorf("exactChat took the body: got %v, want %v", took, tc.take)
			}
			if diff := compareChatParses([]byte(tc.body)); diff != "" {
				t.Error(diff)
			}
		})
	}
}

// TestExactChatNames: every name chat declares in the objects exactChat
// reads itself (the body, a message, a content part, an image) is a key
// exactKey reads. exactChat
// needs no case folding because of it: a plain lower-case key is never
// another case of such a name. A declared name with an upper-case letter
// would make exactChat take a body the check refuses.
func TestExactChatNames(t *testing.T) {
	names := append(chatNames[:], "role", "name", "content", "tool_calls", "function_call", "refusal", "audio",
		"type", "text", "image_url", "url", "detail")
	for _, name := range names {
		key := []byte(`"` + name + `":1`)
		if got, _, ok := exactKey(key, 0); !ok || got != name {
			t.Errorf("exactKey(%s): got %q, %v; want %q", key, got, ok, name)
		}
	}
	for _, fields := range []*llm.Fields{chatFields, chatMessageFields, chatContentFields, chatImageFields} {
		if len(fields.Names()) == 0 {
			t.Errorf("Fields %p: no names", fields)
		}
		for _, name := range fields.Names() {
			if _, _, ok := exactKey([]byte(`"`+name+`":1`), 0); !ok {
				t.Errorf("declared name %q is not a key exactKey reads", name)
			}
		}
	}
}

// TestExactChatParseAllocs: a usual body, taken by exactChat, allocates
// nothing per message, with the model before the messages and after.
func TestExactChatParseAllocs(t *testing.T) {
	for _, tc := range []func(n int) string{
		func(n int) string {
			return `{"model":"gpt-4o","messages":[` + llmtest.Repeat(`{"role":"user","name":"ann","content":"hi there"},`+
				`{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"ok"}`, n) + `],"tools":[{"type":"function"}]}`
		},
	} {
		if _, took, _ := exactChat([]byte(tc(3)), llmtest.ParseOptions()); !took {
			t.Fatal("exactChat left the body")
		}
		llmtest.CheckParseAllocs(t, Chat{}, "/v1/x", func(n int) []byte { return []byte(tc(n)) })
	}
}

// TestExactChatValueAllocs: the values exactChat checks with the check
// cost it what the check of the whole body costs scanChat: one checker
// keeps its room for deep levels and its key tables from value to value,
// rather than a checker a value, each allocating its own.
func TestExactChatValueAllocs(t *testing.T) {
	for _, value := range []string{
		strings.Repeat("[", 100) + strings.Repeat("]", 100),
		`{` + manyKeys(20)[1:] + `}`,
		`{"a":[],"b":{"c":1}}`,
	} {
		body := []byte(`{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"x","x":`+value+`},`, 200) + `{}]}`)
		opts := llmtest.ParseOptions()
		if _, took, _ := exactChat(body, opts); !took {
			t.Fatalf("%.40s: exactChat left the body", value)
		}
		exact := testing.AllocsPerRun(5, func() { exactChat(body, opts) })
		scan := testing.AllocsPerRun(5, func() { scanChat(body, opts) })
		if exact > scan+2 {
			t.Errorf("%.40s: exactChat allocates %.0f times a parse, scanChat %.0f", value, exact, scan)
		}
	}
}
