package openai

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// Attacks on how a chat stream's events reach the chunk fast path: SSE
// framing that makes a usage chunk look like data when it is not, or
// not when it is, and events at the size bound. Each stream is read
// whole, cut in two at every byte and a byte at a time, and must leave
// the reader with the pinned usage and observed output every time: the
// single-data-line fast path of the SSE decoder (dataEvent) sees whole
// events only in some of those cuts.

// attackUsage is a usage chunk in OpenAI's shape.
const attackUsage = attackHead + `"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50}}`

// attackText is a text chunk in OpenAI's shape.
const attackText = attackHead + `"choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}]}`

type streamAttack struct {
	name      string
	stream    string
	maxBuffer int // the reader's event bound; 0 for the default
	usage     *accounting.Usage
	observed  int64
}

var streamAttacks = []streamAttack{
	{name: "one data line", stream: "data: " + attackUsage + "\n\n", usage: inOut(100, 50)},
	{name: "no space after the colon", stream: "data:" + attackUsage + "\n\n", usage: inOut(100, 50)},
	{name: "two spaces after the colon", stream: "data:  " + attackUsage + "\n\n", usage: inOut(100, 50)},
	{name: "CRLF", stream: "data: " + attackUsage + "\r\n\r\n", usage: inOut(100, 50)},
	{name: "CR", stream: "data: " + attackUsage + "\r\r", usage: inOut(100, 50)},
	{name: "LF then CRLF", stream: "data: " + attackUsage + "\n\r\n", usage: inOut(100, 50)},
	{name: "a byte order mark", stream: "\xef\xbb\xbfdata: " + attackUsage + "\n\n", usage: inOut(100, 50)},
	{name: "two byte order marks", stream: "\xef\xbb\xbf\xef\xbb\xbfdata: " + attackUsage + "\n\n"},
	{name: "an event type and an id", stream: "event: message\nid: 1\ndata: " + attackUsage + "\n\n", usage: inOut(100, 50)},
	{name: "a retry line", stream: "retry: 10\ndata: " + attackUsage + "\n\n", usage: inOut(100, 50)},
	{name: "data split over two lines", stream: "data: " + attackUsage[:len(attackHead)] + "\ndata: " + attackUsage[len(attackHead):] + "\n\n",
		usage: inOut(100, 50)},
	// Data lines that join into malformed JSON go to gjson, which reads
	// what it can: an event of two chunks as one object, whose last
	// choices are the usage chunk's; a usage object split inside a count
	// is not JSON, and unreadable (the SDKs refuse both).
	{name: "data split inside a count", stream: "data: " + strings.Replace(attackUsage, `100`, "10\ndata: 0", 1) + "\n\n"},
	{name: "the usage chunk in a comment", stream: ": data: " + attackUsage + "\n\n"},
	{name: "the usage chunk after a comment line", stream: ": hi\ndata: " + attackUsage + "\n\n", usage: inOut(100, 50)},
	{name: "Data", stream: "Data: " + attackUsage + "\n\n"},
	{name: "a space before the colon", stream: "data : " + attackUsage + "\n\n"},
	{name: "a space before the name", stream: " data: " + attackUsage + "\n\n"},
	{name: "a tab after the colon", stream: "data:\t" + attackUsage + "\n\n", usage: inOut(100, 50)},
	{name: "a longer name", stream: "datas: " + attackUsage + "\n\n"},
	{name: "a name with a NUL", stream: "data\x00: " + attackUsage + "\n\n"},
	{name: "no blank line after the event", stream: "data: " + attackUsage + "\n"},
	{name: "a text chunk, then the usage chunk", stream: "data: " + attackText + "\n\ndata: " + attackUsage + "\n\n",
		usage: inOut(100, 50), observed: fingerprints("hi")},
	{name: "a text chunk and the usage chunk in one event", stream: "data: " + attackText + "\ndata: " + attackUsage + "\n\n",
		usage: inOut(100, 50)},
	{name: "the usage chunk, then [DONE]", stream: "data: " + attackUsage + "\n\ndata: [DONE]\n\n", usage: inOut(100, 50)},
	{name: "a later usage chunk lower", stream: "data: " + attackUsage + "\n\ndata: " +
		strings.Replace(strings.Replace(attackUsage, "100", "1", 1), "50", "1", 1) + "\n\n", usage: inOut(1, 1)},
	{name: "the usage chunk at the bound", stream: "data: " + attackUsage + "\n\n", maxBuffer: len(attackUsage), usage: inOut(100, 50)},
	{name: "the usage chunk past the bound", stream: "data: " + attackUsage + "\n\n", maxBuffer: len(attackUsage) - 1,
		observed: llm.ObservedTokens(int64(len(attackUsage)))},
	{name: "the usage chunk past the bound with its space", stream: "data:  " + attackUsage + "\n\n", maxBuffer: len(attackUsage),
		observed: llm.ObservedTokens(int64(len(attackUsage) + 1))},
	{name: "a text chunk past the bound", stream: "data: " + attackText + "\n\n", maxBuffer: len(attackText) - 1,
		observed: llm.ObservedTokens(int64(len(attackText)))},
}

// TestStreamAttacks: see streamAttacks.
func TestStreamAttacks(t *testing.T) {
	for _, tc := range streamAttacks {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.stream)
			writes := [][][]byte{{b}}
			for k := range len(b) + 1 {
				writes = append(writes, [][]byte{b[:k], b[k:]})
			}
			bytewise := make([][]byte, len(b))
			for i := range b {
				bytewise[i] = b[i : i+1]
			}
			writes = append(writes, bytewise)
			for _, w := range writes {
				r := NewStreamReader("m", llm.ReaderOptions{Counter: llmtest.Fingerprint{}, MaxBuffer: tc.maxBuffer}, ChatDeltaText)
				for _, p := range w {
					r.Write(p)
				}
				u, ok := r.Usage()
				switch {
				case tc.usage == nil && ok:
					t.Fatalf("in %d writes: got usage %+v, want none", len(w), u)
				case tc.usage != nil && (!ok || u != *tc.usage):
					t.Fatalf("in %d writes (the first %d bytes): got usage %+v %v, want %+v", len(w), len(w[0]), u, ok, *tc.usage)
				}
				if got := r.ObservedOutputTokens(); got != tc.observed {
					t.Fatalf("in %d writes (the first %d bytes): got %d observed, want %d", len(w), len(w[0]), got, tc.observed)
				}
			}
		})
	}
}
