package anthropic

import (
	"bytes"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// Most events of a Messages stream are text deltas, in the one shape
// Anthropic sends, without whitespace:
//
//	{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"…"}}
//
// exactDelta reads such an event by comparing the bytes around its
// index and text with that shape and finding where the text ends: a
// fraction of what parsing the event with gjson costs. An event in that
// shape is well-formed JSON, and readEvent's other paths read it the
// same way (its type, its delta, the delta's type and its text), which
// TestStreamPathsAgree, FuzzStreamPaths and TestExactDeltaMutations hold
// it to.

// deltaShapes are the delta types exactDelta reads, each with the member
// that follows its type, and whether that member's text is counted (a
// signature is not output).
var deltaShapes = []struct {
	rest  string // after `{"type":"`
	count bool
}{
	{`text_delta","text":`, true},
	{`thinking_delta","thinking":`, true},
	{`input_json_delta","partial_json":`, true},
	{`signature_delta","signature":`, false},
}

// exactDelta counts the text of a content_block_delta in Anthropic's
// shape, and reports false, having counted nothing, for any other event.
func (r *StreamReader) exactDelta(data []byte) bool {
	const head = `{"type":"content_block_delta","index":`
	if len(data) < len(head) || string(data[:len(head)]) != head {
		return false
	}
	i := len(head)
	// The index: 0 or a digit 1-9 and more digits.
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		return false
	}
	const delta = `,"delta":{"type":"`
	if len(data)-i < len(delta) || string(data[i:i+len(delta)]) != delta {
		return false
	}
	i += len(delta)
	count := false
	matched := false
	for _, s := range deltaShapes {
		if len(data)-i >= len(s.rest) && string(data[i:i+len(s.rest)]) == s.rest {
			i += len(s.rest)
			count, matched = s.count, true
			break
		}
	}
	if !matched || i == len(data) || data[i] != '"' {
		return false
	}
	start := i
	if k := bytes.IndexByte(data[i+1:], '"'); k >= 0 && data[i+k] != '\\' {
		i += k + 2
	} else {
		end, ok := llm.ValueEnd(data, i, 0)
		if !ok {
			return false
		}
		i = end
	}
	if string(data[i:]) != "}}" {
		return false
	}
	if count {
		r.buf = r.buf[:0]
		text, _ := llm.JSONText(data[start:i], &r.buf)
		r.count(text)
		if cap(r.buf) > maxKeptBuf {
			r.buf = nil
		}
	}
	return true
}
