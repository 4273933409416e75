package anthropic

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// Attacks on exactDelta: events close to Anthropic's text delta shape,
// built to make it count less text than the other paths, or hide a
// usage report or an error behind a delta. Each case pins whether
// exactDelta reads the event, what the reader counts, its usage and
// error flag, and (checkPaths) that the scanner's paths and gjson's
// agree. Where a member repeats, gjson's reading (the first "type") is
// what every path keeps.

// deltaPrefix is a text delta's bytes before its text.
const deltaPrefix = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`

// fingerprints is what the test reader's counter counts for texts.
func fingerprints(texts ...string) int64 {
	var n int64
	for _, s := range texts {
		if s != "" {
			n += llmtest.Fingerprint{}.CountTokens("m", s)
		}
	}
	return n
}

var deltaAttacks = []struct {
	name    string
	event   string
	fast    bool
	texts   []string
	usage   bool
	errored bool
}{
	{name: "Anthropic's shape", fast: true, texts: []string{"a"}, event: deltaPrefix + `"a"}}`},
	{name: "an escaped quote and braces in the text", fast: true, texts: []string{`a"}}`}, event: deltaPrefix + `"a\"}}"}}`},
	{name: "a text ending in an escaped backslash", fast: true, texts: []string{`a\`}, event: deltaPrefix + `"a\\"}}`},
	{name: "a text ending in an escaped backslash and a quote", fast: true, texts: []string{`a\"`}, event: deltaPrefix + `"a\\\""}}`},
	{name: "a signature", fast: true,
		event: `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abcd"}}`},
	{name: "a text delta carrying thinking", fast: false,
		event: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","thinking":"abcd"}}`},
	{name: "a thinking delta carrying text", fast: false,
		event: `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","text":"abcd"}}`},
	{name: "a signature delta carrying text", fast: false,
		event: `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","text":"abcd"}}`},
	{name: "a second text", fast: false, texts: []string{"a"}, event: deltaPrefix + `"a","text":"bbbb"}}`},
	{name: "a second delta", fast: false, texts: []string{"a"}, event: deltaPrefix + `"a"},"delta":{"type":"text_delta","text":"bbbb"}}`},
	{name: "a message delta's type and usage after", fast: false, texts: []string{"a"},
		event: deltaPrefix + `"a"},"type":"message_delta","usage":{"output_tokens":1}}`},
	{name: "an error type after", fast: false, texts: []string{"a"}, event: deltaPrefix + `"a"},"type":"error"}`},
	{name: "an error event after", fast: false, texts: []string{"a"}, event: deltaPrefix + `"a"}}{"type":"error"}`},
	{name: "an escaped type", fast: false, texts: []string{"a"},
		event: `{"type":"content_block_delt\u0061","index":0,"delta":{"type":"text_delta","text":"a"}}`},
	{name: "an escaped delta type", fast: false, texts: []string{"a"},
		event: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delt\u0061","text":"a"}}`},
	{name: "an escaped text key", fast: false, texts: []string{"a"},
		event: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","t\u0065xt":"a"}}`},
	{name: "a type in another case", fast: false,
		event: `{"type":"Content_Block_Delta","index":0,"delta":{"type":"text_delta","text":"a"}}`},
	{name: "an index of 400 digits", fast: true, texts: []string{"a"},
		event: `{"type":"content_block_delta","index":` + strings.Repeat("9", 400) + `,"delta":{"type":"text_delta","text":"a"}}`},
	{name: "a negative index", fast: false, texts: []string{"a"},
		event: `{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"a"}}`},
	{name: "an index in an exponent", fast: false, texts: []string{"a"},
		event: `{"type":"content_block_delta","index":1e3,"delta":{"type":"text_delta","text":"a"}}`},
	{name: "an index as a string", fast: false, texts: []string{"a"},
		event: `{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"a"}}`},
	{name: "a text not a string", fast: false, event: deltaPrefix + `["a"]}}`},
	{name: "a text of escapes", fast: true, texts: []string{"a\n😀\ufffd\u2028"}, event: deltaPrefix + `"a\n\ud83d\ude00\ud800\u2028"}}`},
	{name: "a text with a raw control byte", fast: true, texts: []string{"a\x01b"}, event: deltaPrefix + "\"a\x01b\"}}"},
	{name: "a text with a raw control byte and an escape", fast: true, texts: []string{"a\n"}, event: deltaPrefix + "\"a\\n\x01b\"}}"},
	{name: "a text with invalid UTF-8", fast: true, texts: []string{"a\xff\xfeb"}, event: deltaPrefix + "\"a\xff\xfeb\"}}"},
	{name: "trailing CRLF", fast: false, texts: []string{"a"}, event: deltaPrefix + "\"a\"}}\r\n"},
	{name: "whitespace inside", fast: false, texts: []string{"a"}, event: deltaPrefix + "\"a\" }}"},
	{name: "a byte order mark", fast: false, event: "\xef\xbb\xbf" + deltaPrefix + `"a"}}`},
	{name: "cut inside the text", fast: false, event: deltaPrefix + `"a}}`},
}

// TestDeltaAttacks: see deltaAttacks.
func TestDeltaAttacks(t *testing.T) {
	for _, tc := range deltaAttacks {
		t.Run(tc.name, func(t *testing.T) {
			ev := []byte(tc.event)
			r := NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}})
			if got := r.exactDelta(ev); got != tc.fast {
				t.Errorf("exactDelta read the event: got %v, want %v", got, tc.fast)
			}
			checkPaths(t, [][]byte{ev}, nil)
			r = NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}})
			r.readEvent(ev, true)
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

// TestDeltaAttackMutations: every attack with one edit, read the same by
// every path.
func TestDeltaAttackMutations(t *testing.T) {
	for _, tc := range deltaAttacks {
		if len(tc.event) > 1000 {
			continue
		}
		ev := []byte(tc.event)
		for i := range ev {
			checkPaths(t, [][]byte{append(ev[:i:i], ev[i+1:]...)}, nil)
			for _, c := range []byte("\"\\ {}[],:0") {
				checkPaths(t, [][]byte{append(append(ev[:i:i], c), ev[i:]...)}, nil)
			}
		}
	}
}
