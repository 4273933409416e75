package openai

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// chatScanCases are bodies that take every path of scanChat: the model
// before and after the messages, or in the path; more counts waiting
// than the stack holds; content of every type, parts that are not
// objects, escapes; and bodies the parse refuses for each of its
// reasons.
var chatScanCases = []struct{ name, body string }{
	{"model first", `{"model":"gpt-4o","messages":[{"role":"system","content":"be brief","name":"ops"},{"role":"user","content":"why"}]}`},
	{"model last", `{"messages":[{"role":"system","content":"be brief","name":"ops"},{"role":"user","content":"why"}],"model":"gpt-4o"}`},
	{"model last, many counts", `{"messages":[` + strings.Repeat(`{"role":"user","content":"a turn of text","name":"n"},`, 40) + `{"role":"user","content":"end"}],"model":"o3"}`},
	{"model first, many parts", `{"model":"o3","messages":[{"role":"user","content":[` + strings.Repeat(`{"type":"text","text":"part"},`, 50) + `{"type":"text","text":"end"}]}]}`},
	{"parts", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}},{"type":"input_audio","input_audio":{"data":"AAAA"}},{"text":"untyped"},{"type":7,"text":"typed by a number"},{"type":"text","text":null},{"type":"text"},{"type":"t\u0065xt","text":"esc\u0061ped"}]}]}`},
	{"images", `{"model":"gpt-4o","messages":[{"role":"user","content":[` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==","detail":"high"}},` +
		`{"type":"image_url","image_url":"https://x/a-string.png"},` +
		`{"type":"image_url"},` +
		`{"image_url":{"detail":"low","url":"https://x/typed-after.png"},"type":"image_url"},` +
		`{"type":"image_url","image_url":[{"url":"https://x/in-an-array.png"}]},` +
		`{"type":"image_url","image_url":{"url":7,"detail":null}},` +
		`{"type":"image_url","image_url":{"url":"https:\/\/x\/escaped.png","detail":"low"}},` +
		`{"type":"image_url","image_url":null},` +
		`{"type":"text","text":"between","image_url":{"url":"https://x/in-a-text-part.png"}},` +
		`{"type":"image_url","image_url":{}}]}]}`},
	{"parts that are not objects", `{"model":"m","messages":[{"role":"user","content":["text",1,null,[{"type":"text","text":"nested"}],{"type":"text","text":"x"}]},{"role":"user","content":[{"type":"text","text":"after"}]}]}`},
	{"parts that are not objects, model last", `{"messages":[{"role":"user","content":[{"type":"text","text":"x"},"text"]},{"content":[{"type":"text","text":"y"}]}],"model":"m"}`},
	{"content of every type", `{"model":"m","messages":[{"role":"user","content":null},{"role":"user","content":{"text":"an object"}},{"role":"user","content":42},{"role":"user","content":true},{"role":"user","content":[]},{"role":"user"},{}]}`},
	{"escapes", `{"model":"gpt-\u0034o","messages":[{"role":"user","con\u0074ent":"\u0068\u0069 \"quoted\" \\ \ud83d\ude00","n\u0061me":"\u00e9"}]}`},
	{"names that are not strings", `{"model":"m","messages":[{"role":"user","content":"x","name":5},{"role":1,"name":null}]}`},
	{"tool calls and the rest", `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}],"function_call":{"name":"g"},"refusal":"no","audio":{"id":"x"}}],"tools":[{"type":"function"}],"functions":[{"name":"f"}]}`},
	{"each counted as JSON alone", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a"}]},{"role":"assistant","function_call":{"name":"g"}},{"role":"assistant","refusal":"no"},{"role":"assistant","audio":{"id":"x"}}]}`},
	{"options", `{"model":"gpt-5","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":100,"max_tokens":50,"n":3,"reasoning_effort":"high","service_tier":"flex"}`},
	{"unknown fields", `{"model":"m","temperature":0.5,"messages":[{"role":"user","content":"x","extra":{"content":"not a message's"}}],"metadata":{"messages":[{"content":"not the messages"}]}}`},
	{"empty", `{"model":"m","messages":[]}`},
	{"a message that is not an object", `{"model":"m","messages":[{"role":"user","content":"x"},"hi"]}`},
	{"a nested message", `{"model":"m","messages":[[{"role":"user","content":"x"}]]}`},
	{"messages an object", `{"model":"m","messages":{"role":"user","content":[[{"type":"text","text":"x"}]]}}`},
	{"no messages", `{"model":"m"}`},
	{"no model", `{"messages":[{"role":"user","content":"x"}]}`},
	{"model a number", `{"model":4,"messages":[{"role":"user","content":"x"}]}`},
	{"bad service tier", `{"model":"m","service_tier":1,"messages":[{"role":"user","content":"x"}]}`},
	{"bad cap", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0}`},
	{"duplicate key", `{"model":"m","messages":[{"role":"user","content":"x","content":"y"}]}`},
	{"key in another case", `{"model":"m","messages":[{"role":"user","Content":"x"}]}`},
	{"syntax error after the messages", `{"model":"m","messages":[{"role":"user","content":"x"}],"n":}`},
	{"bad UTF-8", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}"},
	{"not an object", `[{"model":"m"}]`},
	// Bodies an adversarial review of exactChat tried.
	{"stream_options key twice", `{"model":"m","messages":[],"stream_options":{"include_usage":true,"include_usage":false}}`},
	{"stream_options, Kelvin sign", `{"model":"m","messages":[],"stream_options":{"include_usage":true,"\u212a":1,"k":2}}`},
	{"long s", `{"model":"m","messages":[],"stream":true,"ſtream":false}`},
	{"content null, then a string", `{"model":"m","messages":[{"role":"user","content":null,"content":"x"}]}`},
	{"role twice, one spaced", `{"model":"m","messages":[{"role" :"user","role":"system"}]}`},
	{"Kelvin sign in a value", `{"model":"m","messages":[{"role":"user","content":"x","x":{"k":1,"\u212a":2}}]}`},
	{"null twice", `{"model":"m","messages":[{"role":"user","content":nullnull}]}`},
	{"eight-byte keys in two cases", `{"model":"m","messages":[],"metadata":{"abcdefgh":1,"ABCDEFGH":2}}`},
	{"an eight-byte key before the model", `{"messages":[{"role":"user","content":"x"}],"mmmmmmmm":1,"model":"m"}`},
	{"NUL after", `{"model":"m","messages":[]}` + "\x00"},
	{"BOM", "\xef\xbb\xbf" + `{"model":"m","messages":[]}`},
	{"form feed", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\x0c\"content\":\"x\"}]}"},
	{"max_tokens past int64", `{"model":"m","messages":[],"max_tokens":9223372036854775808}`},
	{"n minus zero", `{"model":"m","messages":[],"n":-0.0e-0}`},
	{"24 more keys in a message", `{"model":"m","messages":[{"role":"user","content":"x"` + manyKeys(24) + `,"k23":0}]}`},
	{"33 messages before the model", `{"messages":[` + strings.Repeat(`{"role":"user","content":null,"name":"n"},`, 33) + `{}],"model":"m","n":2}`},
	{"512 objects deep", `{"model":"m","messages":[],"x":` + strings.Repeat(`{"a":`, 512) + `1` + strings.Repeat("}", 512) + `}`},
}

// TestChatScan: the one-pass parse of a chat request returns what the
// parse that checks, then walks, returns, for each case.
func TestChatScan(t *testing.T) {
	for _, tc := range chatScanCases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := compareChatParses([]byte(tc.body)); diff != "" {
				t.Error(diff)
			}
		})
	}
}

// FuzzChatScan holds scanChat to walkChat, and exactChat to scanChat
// where it takes the body: for every body, the same
// request (the estimate and all) or the same error, with the calibrated
// counter and with one that counts the empty text too, the model from
// the body or from the path.
func FuzzChatScan(f *testing.F) {
	for _, tc := range chatScanCases {
		f.Add([]byte(tc.body))
	}
	paths, err := filepath.Glob("../../../testdata/openai/*request*.json")
	if err != nil || len(paths) == 0 {
		f.Fatalf("no request fixtures (%v)", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, m := range chatKnobs[1].Values {
		f.Add([]byte(`{"model":"m","messages":` + m + `}`))
	}
	for _, tc := range exactChatCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if diff := compareChatParses(body); diff != "" {
			t.Fatal(diff)
		}
	})
}

// lengthCounter counts a text's bytes plus one, so that counting the
// empty text shows; and an image as its width.
type lengthCounter struct{}

func (lengthCounter) CountTokens(_, text string) int64 { return int64(len(text)) + 1 }
func (lengthCounter) ImageTokens(_, _ string, width, _ int) int64 {
	return int64(width) + 7
}

// compareChatParses parses body with scanChat and walkChat under several
// options, and with exactChat when it takes the body, and describes the
// first difference.
func compareChatParses(body []byte) string {
	for _, opts := range []llm.ParseOptions{
		{DefaultOutputCap: 4096},
		{Counter: tokenizer.Default(), DefaultOutputCap: 100},
		{Counter: lengthCounter{}, DefaultOutputCap: 1},
		{Counter: lengthCounter{}, Model: "azure-deployment"},
	} {
		got, gotErr := scanChat(body, opts)
		want, wantErr := walkChat(body, opts)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			return fmt.Sprintf("counter %T, model %q: got error %v, want %v", opts.Counter, opts.Model, gotErr, wantErr)
		}
		if got != want {
			return fmt.Sprintf("counter %T, model %q: got %+v, want %+v", opts.Counter, opts.Model, got, want)
		}
		if exact, ok, exactErr := exactChat(body, opts); ok {
			if fmt.Sprint(exactErr) != fmt.Sprint(gotErr) {
				return fmt.Sprintf("exactChat, counter %T, model %q: got error %v, want %v", opts.Counter, opts.Model, exactErr, gotErr)
			}
			if exact != got {
				return fmt.Sprintf("exactChat, counter %T, model %q: got %+v, want %+v", opts.Counter, opts.Model, exact, got)
			}
		}
	}
	return ""
}
