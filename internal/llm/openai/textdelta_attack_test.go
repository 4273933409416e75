package openai

import (
	"strings"
	"testing"
)

// Attacks on the Responses API's text delta fast path: events close to
// OpenAI's shape, built to make it count less text than the general path
// would, miss an error or a usage object beside the delta, or read past
// the scanner's depth. Each case pins whether scanTextDelta reads the
// event, the text counted, usage and the error flag, and (checkTextDelta)
// that it, scanEvent and gjson agree.

// deltaHead is an output text delta's members before its delta.
const deltaHead = `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,`

var textDeltaAttacks = []struct {
	name    string
	event   string
	fast    bool
	texts   []string
	usage   bool
	errored bool
}{
	{name: "OpenAI's shape", fast: true, texts: []string{"a"}, event: deltaHead + `"delta":"a","logprobs":[],"obfuscation":"x"}`},
	{name: "a second delta", fast: false, texts: []string{"b"}, event: deltaHead + `"delta":"a","delta":"b"}`},
	{name: "a second type, error", fast: false, errored: true, event: deltaHead + `"delta":"a","type":"error"}`},
	{name: "a second type, not a delta", fast: false, event: deltaHead + `"delta":"a","type":"response.audio.delta"}`},
	{name: "a usage object after", fast: false, texts: []string{"a"}, usage: true,
		event: deltaHead + `"delta":"a","usage":{"input_tokens":5,"output_tokens":3}}`},
	{name: "a response after", fast: false, texts: []string{"a"}, usage: true,
		event: deltaHead + `"delta":"a","response":{"usage":{"input_tokens":5,"output_tokens":3}}}`},
	{name: "an error after", fast: false, texts: []string{"a"}, errored: true, event: deltaHead + `"delta":"a","error":null}`},
	{name: "an escaped type", fast: false, texts: []string{"a"},
		event: `{"type":"response.output_text\u002edelta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"a"}`},
	{name: "a type in another case", fast: false,
		event: `{"type":"Response.Output_Text.Delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"a"}`},
	{name: "Type", fast: false,
		event: `{"Type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"a"}`},
	{name: "the audio delta's type", fast: false,
		event: `{"type":"response.audio.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"a"}`},
	{name: "an escaped quote in the item id", fast: false, texts: []string{"a"},
		event: `{"type":"response.output_text.delta","sequence_number":3,"item_id":"m\",\"delta\":\"\"","output_index":0,"content_index":0,"delta":"a"}`},
	{name: "an escaped quote in the obfuscation", fast: false, texts: []string{"a"},
		event: deltaHead + `"delta":"a","obfuscation":"x\",\"delta\":\"\""}`},
	{name: "a delta in the logprobs", fast: true, texts: []string{"a"},
		event: deltaHead + `"delta":"a","logprobs":[{"delta":"bbbb","type":"error","usage":{"output_tokens":1}}]}`},
	{name: "logprobs nested to the scanner's depth", fast: true, texts: []string{"a"},
		event: deltaHead + `"delta":"a","logprobs":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`},
	{name: "logprobs nested past the scanner's depth", fast: false, texts: []string{"a"},
		event: deltaHead + `"delta":"a","logprobs":` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `}`},
	{name: "a sequence number of 400 digits", fast: true, texts: []string{"a"},
		event: `{"type":"response.output_text.delta","sequence_number":` + strings.Repeat("9", 400) +
			`,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"a"}`},
	{name: "a sequence number in an exponent", fast: false, texts: []string{"a"},
		event: `{"type":"response.output_text.delta","sequence_number":1e3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"a"}`},
	{name: "a negative index", fast: false, texts: []string{"a"},
		event: `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":-0,"content_index":0,"delta":"a"}`},
	{name: "a delta of escapes", fast: true, texts: []string{"a\"b\\c\n😀\ufffd"},
		event: deltaHead + `"delta":"a\"b\\c\n\ud83d\ude00\udc00"}`},
	{name: "a delta ending in an escaped backslash", fast: true, texts: []string{`a\`}, event: deltaHead + `"delta":"a\\"}`},
	{name: "a delta with a raw control byte", fast: true, texts: []string{"a\x01b"}, event: deltaHead + "\"delta\":\"a\x01b\"}"},
	{name: "a delta with invalid UTF-8", fast: true, texts: []string{"a\xffb"}, event: deltaHead + "\"delta\":\"a\xffb\"}"},
	{name: "trailing CRLF", fast: false, texts: []string{"a"}, event: deltaHead + "\"delta\":\"a\"}\r\n"},
	{name: "an error object after", fast: false, errored: true, event: deltaHead + `"delta":"a"}{"type":"error"}`},
	{name: "a byte order mark", fast: false, event: "\xef\xbb\xbf" + deltaHead + `"delta":"a"}`},
}

// TestTextDeltaAttacks: see textDeltaAttacks.
func TestTextDeltaAttacks(t *testing.T) {
	for _, tc := range textDeltaAttacks {
		t.Run(tc.name, func(t *testing.T) {
			ev := []byte(tc.event)
			if got := newResponsesReader().scanTextDelta(ev); got != tc.fast {
				t.Errorf("scanTextDelta read the event: got %v, want %v", got, tc.fast)
			}
			checkTextDelta(t, ev)
			r := newResponsesReader()
			r.onEvent(sseEvent(ev))
			if got, want := r.ObservedOutputTokens(), fingerprints(tc.texts...); got != want {
				t.Errorf("got %d observed, want %d (the texts %q)", got, want, tc.texts)
			}
			if _, ok := r.Usage(); ok != tc.usage {
				t.Errorf("got usage %v, want %v", ok, tc.usage)
			}
			if r.Errored() != tc.errored {
				t.Errorf("got errored %v, want %v", r.Errored(), tc.errored)
			}
		})
	}
}

// TestTextDeltaAttackMutations: every attack with one edit, read the same
// by scanTextDelta, scanEvent and gjson.
func TestTextDeltaAttackMutations(t *testing.T) {
	for _, tc := range textDeltaAttacks {
		if len(tc.event) > 1000 {
			continue
		}
		for _, m := range chunkMutations([]byte(tc.event)) {
			checkTextDelta(t, m)
		}
	}
}
