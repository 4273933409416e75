package openai

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
	"github.com/tokenwarden/tokenwarden/internal/sse"
)

// Attacks on the chat chunk fast path: events built to make it read
// usage low, zero or not at all, or count less text than the general
// path would. Each case pins what the reader must end up with (its
// usage and the text it counts), whether the fast path reads the event
// itself or leaves it to scanEvent, and, through checkChunk, that the
// fast path, scanEvent and gjson agree on it.
//
// Where an event repeats a member, the general path's reading is the
// one pinned. A repeated usage object, or a repeated count or details
// object inside one (under one name or both of its names), makes the
// usage unreadable: clients read it differently (JSON.parse and
// Python's json the last, the official Go SDKs the first), and the
// reader reports no usage, so settlement falls back rather than take
// the smaller; so do counts that are not non-negative JSON integers.
// The fast path leaves every such event to scanEvent, which leaves it
// to gjson. A repeated member inside a choice or a tool call is read
// first-wins, as gjson's Get finds it.

// attackHead is a chunk's members before its choices, in OpenAI's order.
const attackHead = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",`

// fingerprints is what the chunk reader's counter counts for texts.
func fingerprints(texts ...string) int64 {
	var n int64
	for _, s := range texts {
		if s != "" {
			n += llmtest.Fingerprint{}.CountTokens("m", s)
		}
	}
	return n
}

type chunkAttack struct {
	name  string
	event string
	fast  bool // the fast path reads the event itself
	usage *accounting.Usage
	texts []string // the texts counted
}

func inOut(in, out int64) *accounting.Usage {
	return &accounting.Usage{InputTokens: in, OutputTokens: out}
}

var chunkAttacks = []chunkAttack{
	// Repeated members.
	{name: "usage twice, the second lower", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50},"usage":{"prompt_tokens":1,"completion_tokens":1}}`},
	{name: "usage, then usage null", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50},"usage":null}`},
	{name: "usage, then usage without counts", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50},"usage":{"total_tokens":0}}`},
	{name: "a prompt count twice", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"prompt_tokens":1}}`},
	{name: "a prompt count under both names", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"input_tokens":1}}`},
	{name: "a completion count under both names", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"output_tokens":50,"completion_tokens":1}}`},
	{name: "a cached count twice", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":90}}}`},
	{name: "details twice, the second without a cached count", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":90},"prompt_tokens_details":{}}}`},
	{name: "details under both names", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":90},"input_tokens_details":{"cached_tokens":2}}}`},
	{name: "a cached count above the prompt", fast: true, usage: &accounting.Usage{InputTokens: 100, CachedInputTokens: 100, OutputTokens: 50},
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":1000}}}`},
	{name: "choices twice", fast: false, texts: []string{"b"},
		event: attackHead + `"choices":[{"delta":{"content":"a"}}],"choices":[{"delta":{"content":"b"}}]}`},
	{name: "a delta twice", fast: false, texts: []string{"a"},
		event: attackHead + `"choices":[{"delta":{"content":"a"},"delta":{"content":"b"}}]}`},
	{name: "content twice", fast: true, texts: []string{"a", "b"},
		event: attackHead + `"choices":[{"delta":{"content":"a","content":"b"}}]}`},
	{name: "arguments twice", fast: false, texts: []string{"a"},
		event: attackHead + `"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"a","arguments":"b"}}]}}]}`},
	{name: "a function without arguments, then one with", fast: false, texts: []string{"b"},
		event: attackHead + `"choices":[{"delta":{"tool_calls":[{"function":{"name":"f"},"function":{"arguments":"b"}}]}}]}`},

	// Escaped keys: the general path decodes them, the fast path leaves them to it.
	{name: "an escaped usage key", fast: false, usage: inOut(5, 3),
		event: attackHead + `"choices":[],"us\u0061ge":{"prompt_tokens":5,"completion_tokens":3}}`},
	{name: "an escaped count key", fast: false, usage: inOut(5, 3),
		event: attackHead + `"choices":[],"usage":{"prompt_tok\u0065ns":5,"completion\u005ftokens":3}}`},
	{name: "an escaped cached key", fast: false, usage: &accounting.Usage{InputTokens: 5, CachedInputTokens: 4, OutputTokens: 3},
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"c\u0061ched_tokens":4}}}`},
	{name: "an escaped choices key", fast: false, texts: []string{"a"},
		event: attackHead + `"\u0063hoices":[{"delta":{"content":"a"}}]}`},
	{name: "an escaped delta key", fast: false, texts: []string{"a"},
		event: attackHead + `"choices":[{"d\u0065lta":{"content":"a"}}]}`},
	{name: "an escaped arguments key", fast: false, texts: []string{"a"},
		event: attackHead + `"choices":[{"delta":{"tool_calls":[{"function":{"\u0061rguments":"a"}}]}}]}`},
	{name: "a key with an escaped quote", fast: false,
		event: attackHead + `"choices":[],"usage\"":{"prompt_tokens":5,"completion_tokens":3}}`},
	{name: "a key with an escaped NUL", fast: false,
		event: attackHead + `"choices":[],"usage\u0000":{"prompt_tokens":5,"completion_tokens":3}}`},
	{name: "a key with a raw NUL", fast: true,
		event: attackHead + "\"choices\":[],\"usage\x00\":{\"prompt_tokens\":5,\"completion_tokens\":3}}"},
	{name: "a key with invalid UTF-8", fast: true,
		event: attackHead + "\"choices\":[],\"usage\xff\":{\"prompt_tokens\":5,\"completion_tokens\":3}}"},
	{name: "a key with an overlong u", fast: true,
		event: attackHead + "\"choices\":[],\"\xc1\xb5sage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}"},

	// Keys in another case are other keys, to the general path and the SDKs alike.
	{name: "Usage", fast: true,
		event: attackHead + `"choices":[],"Usage":{"prompt_tokens":5,"completion_tokens":3}}`},
	{name: "USAGE beside usage", fast: true, usage: inOut(5, 3),
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3},"USAGE":{"prompt_tokens":1,"completion_tokens":1}}`},
	{name: "counts in another case", fast: true, usage: inOut(5, 0),
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":5,"Completion_Tokens":3}}`},
	{name: "Content", fast: true,
		event: attackHead + `"choices":[{"delta":{"Content":"a"}}]}`},
	{name: "an object in another case", fast: false, texts: []string{"a"},
		event: `{"id":"c","object":"Chat.Completion.Chunk","created":1,"model":"m","choices":[{"delta":{"content":"a"}}]}`},

	// Usage objects where the reader must not look for them.
	{name: "usage inside content", fast: true, usage: inOut(100, 50),
		texts: []string{`","usage":{"prompt_tokens":1,"completion_tokens":1}}`},
		event: attackHead + `"choices":[{"delta":{"content":"\",\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}"}}],` +
			`"usage":{"prompt_tokens":100,"completion_tokens":50}}`},
	{name: "usage inside tool arguments", fast: true, usage: inOut(100, 50),
		texts: []string{`{"usage":{"prompt_tokens":1}}`},
		event: attackHead + `"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"usage\":{\"prompt_tokens\":1}}"}}]}}],` +
			`"usage":{"prompt_tokens":100,"completion_tokens":50}}`},
	{name: "usage inside content, escaped as \\u", fast: true, texts: []string{`"usage":{"prompt_tokens":1}`},
		event: attackHead + `"choices":[{"delta":{"content":"\u0022usage\u0022:{\u0022prompt_tokens\u0022:1}"}}]}`},
	{name: "usage inside a choice", fast: true, usage: inOut(100, 50),
		event: attackHead + `"choices":[{"delta":{},"usage":{"prompt_tokens":1,"completion_tokens":1}}],"usage":{"prompt_tokens":100,"completion_tokens":50}}`},
	{name: "usage inside a delta", fast: true,
		event: attackHead + `"choices":[{"delta":{"usage":{"prompt_tokens":1,"completion_tokens":1}}}]}`},
	{name: "usage inside logprobs", fast: true,
		event: attackHead + `"choices":[{"delta":{},"logprobs":{"usage":{"prompt_tokens":1,"completion_tokens":1}}}]}`},
	{name: "usage inside another member", fast: true,
		event: attackHead + `"choices":[],"extra":{"usage":{"prompt_tokens":1,"completion_tokens":1}}}`},
	{name: "usage inside response", fast: false, usage: inOut(1, 1),
		event: attackHead + `"choices":[],"response":{"usage":{"prompt_tokens":1,"completion_tokens":1}}}`},
	{name: "usage and Groq's usage, the same", fast: false, usage: inOut(100, 50),
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50},` +
			`"x_groq":{"id":"req_1","usage":{"queue_time":0.02,"prompt_tokens":100,"completion_tokens":50}}}`},
	{name: "usage and Groq's usage, the second lower", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50},"x_groq":{"usage":{"prompt_tokens":1,"completion_tokens":1}}}`},
	{name: "usage inside response, then usage lower", fast: false,
		event: attackHead + `"choices":[],"response":{"usage":{"input_tokens":100,"output_tokens":50}},"usage":{"input_tokens":1,"output_tokens":1}}`},
	{name: "usage inside response, then usage without counts", fast: false, usage: inOut(100, 50),
		event: attackHead + `"choices":[],"response":{"usage":{"input_tokens":100,"output_tokens":50}},"usage":{"total_tokens":1}}`},
	{name: "usage inside usage", fast: true, usage: inOut(100, 50),
		event: attackHead + `"choices":[],"usage":{"usage":{"prompt_tokens":1,"completion_tokens":1},"prompt_tokens":100,"completion_tokens":50}}`},

	// Numbers. A count that is not a non-negative JSON integer (a
	// fraction, a negative, a string, a number JSON does not allow) makes
	// the usage unreadable; an integer written with an exponent or a
	// zero fraction is read.
	{name: "exponents and fractions", fast: true, usage: &accounting.Usage{InputTokens: 1000, CachedInputTokens: 100, OutputTokens: 1},
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":1e3,"completion_tokens":1.0,"prompt_tokens_details":{"cached_tokens":1E+2}}}`},
	{name: "fractions below one and small exponents", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":0.9,"completion_tokens":10e-1}}`},
	{name: "negative zero and negatives", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":-0,"completion_tokens":-50}}`},
	{name: "negative zero with a fraction", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":-0.0,"completion_tokens":-1e400}}`},
	{name: "a leading zero", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":00,"completion_tokens":50}}`},
	{name: "the longest count read without strconv", fast: true, usage: inOut(accounting.MaxTokens, 12345678901234),
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":999999999999999999,"completion_tokens":12345678901234}}`},
	{name: "counts past 18 digits", fast: true, usage: inOut(accounting.MaxTokens, accounting.MaxTokens),
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":1000000000000000000,"completion_tokens":9223372036854775807}}`},
	{name: "counts past int64", fast: true, usage: inOut(accounting.MaxTokens, accounting.MaxTokens),
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":9223372036854775808,"completion_tokens":18446744073709551617}}`},
	{name: "a count of 400 digits", fast: true, usage: inOut(accounting.MaxTokens, 5),
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":` + strings.Repeat("9", 400) + `,"completion_tokens":5}}`},
	{name: "a count of 400 digits, negative", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":-` + strings.Repeat("9", 400) + `,"completion_tokens":5}}`},
	{name: "counts as strings and other values", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":"100","completion_tokens":true}}`},
	{name: "a plus sign", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":+100,"completion_tokens":50}}`},
	{name: "a prompt count as a string, alone", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":"100","completion_tokens":50}}`},
	{name: "a completion count of true", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":true}}`},
	{name: "a count of null", fast: true, usage: inOut(100, 0),
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":null}}`},
	{name: "both counts null", fast: true,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":null,"completion_tokens":null}}`},
	{name: "detail counts of null", fast: true, usage: inOut(100, 50),
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,` +
			`"prompt_tokens_details":{"audio_tokens":null,"cached_tokens":null},"completion_tokens_details":{"audio_tokens":null}}}`},
	{name: "a count, then the same count null", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"completion_tokens":null}}`},
	{name: "details that are not an object", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"prompt_tokens_details":7}}`},
	{name: "details of null", fast: true, usage: inOut(100, 50),
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50,"prompt_tokens_details":null}}`},
	{name: "a bare fraction", fast: false,
		event: attackHead + `"choices":[],"usage":{"prompt_tokens":.5,"completion_tokens":50}}`},

	// Whitespace, line ends and a byte order mark: the general path reads
	// JSON whitespace, not a BOM; a usage object with other bytes between
	// its tokens is not JSON, and unreadable.
	{name: "CRLF inside and after", fast: false, usage: inOut(5, 3),
		event: attackHead + "\"choices\":[],\r\n\"usage\":{\"prompt_tokens\":5,\r\n\"completion_tokens\":3}}\r\n"},
	{name: "tabs around a count", fast: false, usage: inOut(5, 3),
		event: attackHead + "\"choices\":[],\"usage\":{\"prompt_tokens\"\t:\t5\t,\"completion_tokens\":3}}"},
	{name: "a byte order mark", fast: false,
		event: "\xef\xbb\xbf" + attackHead + `"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}`},
	{name: "a vertical tab", fast: false,
		event: attackHead + "\"choices\":[],\"usage\":{\"prompt_tokens\":\v5,\"completion_tokens\":3}}"},
	{name: "a no-break space", fast: false,
		event: attackHead + "\"choices\":[],\"usage\":{\"prompt_tokens\":\u00a05,\"completion_tokens\":3}}"},

	// Text at the edges of UTF-8, and control bytes: gjson, and so every
	// path, ends an escaped string's text at a raw control byte.
	{name: "invalid UTF-8 in content", fast: true, texts: []string{"a\xff\xfeb"},
		event: attackHead + "\"choices\":[{\"delta\":{\"content\":\"a\xff\xfeb\"}}]}"},
	{name: "a lone surrogate", fast: true, texts: []string{"a\ufffdb"},
		event: attackHead + `"choices":[{"delta":{"content":"a\ud800b"}}]}`},
	{name: "a surrogate pair", fast: true, texts: []string{"a😀b"},
		event: attackHead + `"choices":[{"delta":{"content":"a\ud83d\ude00b"}}]}`},
	{name: "line and paragraph separators, raw and escaped", fast: true, texts: []string{"a\u2028b\u2029c\u2028"},
		event: attackHead + "\"choices\":[{\"delta\":{\"content\":\"a\u2028b\u2029c\\u2028\"}}]}"},
	{name: "an escaped NUL and a raw control byte", fast: true, texts: []string{"a\x00b"},
		event: attackHead + "\"choices\":[{\"delta\":{\"content\":\"a\\u0000b\x01c\"}}]}"},
	{name: "a text ending in an escaped backslash", fast: true, texts: []string{`a\`, "b"},
		event: attackHead + `"choices":[{"delta":{"content":"a\\","refusal":"b"}}]}`},
}

// TestChunkAttacks: see chunkAttacks.
func TestChunkAttacks(t *testing.T) {
	for _, tc := range chunkAttacks {
		t.Run(tc.name, func(t *testing.T) {
			ev := []byte(tc.event)
			if got := newChunkReader().scanChunk(ev); got != tc.fast {
				t.Errorf("the fast path read the event: got %v, want %v", got, tc.fast)
			}
			checkChunk(t, ev)
			r := newChunkReader()
			r.onEvent(sseEvent(ev))
			u, ok := r.Usage()
			switch {
			case tc.usage == nil && ok:
				t.Errorf("got usage %+v, want none", u)
			case tc.usage != nil && (!ok || u != *tc.usage):
				t.Errorf("got usage %+v %v, want %+v", u, ok, *tc.usage)
			}
			if got, want := r.ObservedOutputTokens(), fingerprints(tc.texts...); got != want {
				t.Errorf("got %d observed, want %d (the texts %q)", got, want, tc.texts)
			}
		})
	}
}

// TestChunkAttackMutations: every attack with one edit, read the same by
// the fast path, scanEvent and gjson.
func TestChunkAttackMutations(t *testing.T) {
	for _, tc := range chunkAttacks {
		if len(tc.event) > 1000 {
			continue
		}
		for _, m := range chunkMutations([]byte(tc.event)) {
			checkChunk(t, m)
		}
	}
}

// FuzzChunkAttacks is FuzzChunkPaths seeded with the attacks.
func FuzzChunkAttacks(f *testing.F) {
	for _, tc := range chunkAttacks {
		f.Add([]byte(tc.event))
	}
	f.Fuzz(func(t *testing.T, ev []byte) { checkChunk(t, ev) })
}

// sseEvent is ev as the decoder dispatches it.
func sseEvent(ev []byte) sse.Event { return sse.Event{Data: ev, DataLen: len(ev)} }
