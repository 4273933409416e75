package anthropic

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestAbsurdUsage: counts no provider sends are booked within
// 0..accounting.MaxTokens, and the parts of the input add up without
// overflowing; counts that are not unambiguously non-negative integers,
// or are there twice, leave the usage unreadable, in JSON bodies and in
// a stream's message_delta alike.
func TestAbsurdUsage(t *testing.T) {
	const huge = accounting.MaxTokens
	cases := []llmtest.Usage{
		{Name: "1e30", Body: `{"usage":{"input_tokens":1e30,"output_tokens":5}}`,
			Want: accounting.Usage{InputTokens: huge, OutputTokens: 5}},
		{Name: "every part huge", Body: `{"usage":{"input_tokens":1.5e308,"cache_creation_input_tokens":9223372036854775808,"cache_read_input_tokens":1e30,"output_tokens":1e400}}`,
			Want: accounting.Usage{InputTokens: huge, CachedInputTokens: huge, OutputTokens: huge}},
		{Name: "integers with exponents", Body: `{"usage":{"input_tokens":10.0,"cache_read_input_tokens":2e0,"output_tokens":3}}`,
			Want: accounting.Usage{InputTokens: 12, CachedInputTokens: 2, OutputTokens: 3}},
		{Name: "breakdown huge", Body: `{"usage":{"input_tokens":1,"cache_creation":{"ephemeral_5m_input_tokens":1e30,"ephemeral_1h_input_tokens":7},"output_tokens":1}}`,
			Want: accounting.Usage{InputTokens: huge, CacheWriteTokens: huge, OutputTokens: 1}}, // the 1h writes clamped away
		{Name: "null counts", Body: `{"usage":{"input_tokens":10,"cache_creation_input_tokens":null,"cache_read_input_tokens":null,"cache_creation":null,"output_tokens":3}}`,
			Want: accounting.Usage{InputTokens: 10, OutputTokens: 3}},
		{Name: "negative", Body: `{"usage":{"input_tokens":1e30,"output_tokens":-5}}`, Unreadable: true},
		{Name: "fractions", Body: `{"usage":{"input_tokens":10.9,"cache_read_input_tokens":2.5,"output_tokens":3.99}}`, Unreadable: true},
		{Name: "a negative breakdown", Body: `{"usage":{"input_tokens":1,"cache_creation":{"ephemeral_5m_input_tokens":1e30,"ephemeral_1h_input_tokens":-7},"output_tokens":1}}`, Unreadable: true},
		{Name: "a count as a string", Body: `{"usage":{"input_tokens":"100","output_tokens":50}}`, Unreadable: true},
		{Name: "a count of true", Body: `{"usage":{"input_tokens":100,"output_tokens":true}}`, Unreadable: true},
		{Name: "a leading zero", Body: `{"usage":{"input_tokens":00,"output_tokens":50}}`, Unreadable: true},
		{Name: "a plus sign", Body: `{"usage":{"input_tokens":+100,"output_tokens":50}}`, Unreadable: true},
		{Name: "a bare fraction", Body: `{"usage":{"input_tokens":.5,"output_tokens":50}}`, Unreadable: true},
		{Name: "a count twice", Body: `{"usage":{"input_tokens":100,"output_tokens":50,"output_tokens":0}}`, Unreadable: true},
		{Name: "a breakdown twice", Body: `{"usage":{"input_tokens":100,"cache_creation":{"ephemeral_5m_input_tokens":9},"cache_creation":{},"output_tokens":50}}`, Unreadable: true},
		{Name: "a breakdown count twice", Body: `{"usage":{"input_tokens":100,"cache_creation":{"ephemeral_1h_input_tokens":9,"ephemeral_1h_input_tokens":0},"output_tokens":50}}`, Unreadable: true},
		{Name: "a breakdown not an object", Body: `{"usage":{"input_tokens":100,"cache_creation":7,"output_tokens":50}}`, Unreadable: true},
		{Name: "usage twice", Body: `{"usage":{"input_tokens":100,"output_tokens":50},"usage":{"input_tokens":0,"output_tokens":0}}`, Unreadable: true},
	}
	llmtest.CheckUsage(t, Messages{}, "application/json", cases)
	for i := range cases {
		// The same counts in a stream's message_delta.
		cases[i].Body = "event: message_delta\ndata: {\"type\":\"message_delta\"," + cases[i].Body[1:] + "\n\n"
	}
	llmtest.CheckUsage(t, Messages{}, "text/event-stream", cases)
}

// TestUnreadableStreamUsage: a stream whose message_start reports usage
// and whose message_delta then reports it ambiguously (usage twice, its
// second all zeros) reports no usage, rather than the zeros or
// message_start's provisional counts; so does a message_start with its
// message, or the message's usage, twice.
func TestUnreadableStreamUsage(t *testing.T) {
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":100,\"output_tokens\":1}}}\n\n"
	for _, tc := range []struct{ name, body string }{
		{"usage twice in message_delta", start +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":500},\"usage\":{\"output_tokens\":0}}\n\n"},
		{"usage twice in message_start", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":" +
			"{\"usage\":{\"input_tokens\":100,\"output_tokens\":1},\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}}\n\n"},
		{"message twice in message_start", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":" +
			"{\"usage\":{\"input_tokens\":100,\"output_tokens\":1}},\"message\":{\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}}\n\n"},
		{"a count as a string in message_delta", start +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\"500\"}}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewStreamReader("m", llmtest.ReaderOptions())
			r.Write([]byte(tc.body))
			if u, ok := r.Usage(); ok || r.Final() {
				t.Errorf("got usage %+v %v (final %v), want none", u, ok, r.Final())
			}
		})
	}
}

// applyGJSON is Apply as gjson reads it, the way it was written before
// applyRaw: FuzzApply holds the two alike.
func (f *UsageFields) applyGJSON(u gjson.Result) (present, readable bool) {
	if !u.IsObject() {
		return false, true
	}
	if !llm.WellFormedObject(llm.BytesView(u.Raw)) {
		return false, false
	}
	readable = true
	var seen [5]bool
	u.ForEach(func(k, v gjson.Result) bool {
		var dst *int64
		var slot int
		switch k.Str {
		case "cache_creation":
			if seen[4] {
				readable = false
				return false
			}
			seen[4] = true
			readable = f.applyBreakdownGJSON(v)
			return readable
		case "input_tokens":
			dst, slot = &f.Input, 0
		case "cache_creation_input_tokens":
			dst, slot = &f.CacheCreation, 1
		case "cache_read_input_tokens":
			dst, slot = &f.CacheRead, 2
		case "output_tokens":
			dst, slot = &f.Output, 3
		default:
			return true
		}
		if seen[slot] {
			readable = false
			return false
		}
		seen[slot] = true
		set, ok := setCountGJSON(dst, v)
		present = present || set
		readable = ok
		return ok
	})
	return present, readable
}

// applyBreakdown reads cache_creation, and reports whether it could.
func (f *UsageFields) applyBreakdownGJSON(v gjson.Result) bool {
	if v.Type == gjson.Null {
		return true
	}
	if !v.IsObject() {
		return false
	}
	f.Split = true
	ok := true
	var seen [2]bool
	v.ForEach(func(k, v gjson.Result) bool {
		var dst *int64
		var slot int
		switch k.Str {
		case "ephemeral_5m_input_tokens":
			dst, slot = &f.Ephemeral5m, 0
		case "ephemeral_1h_input_tokens":
			dst, slot = &f.Ephemeral1h, 1
		default:
			return true
		}
		if seen[slot] {
			ok = false
			return false
		}
		seen[slot] = true
		_, ok = setCountGJSON(dst, v)
		return ok
	})
	return ok
}

// setCount stores a token count (see llm.ReadCount): set, it did; ok,
// the count was readable. A null leaves dst alone, as Anthropic sends
// null for a count it does not report.
func setCountGJSON(dst *int64, v gjson.Result) (set, ok bool) {
	if v.Type == gjson.Null {
		return false, true
	}
	n, ok := llm.ReadCount(v)
	if !ok {
		return false, false
	}
	*dst = n
	return true, true
}

// FuzzApply holds Apply, which reads with the scanner, to gjson's
// reading of the same usage object, applied to the same fields.
func FuzzApply(f *testing.F) {
	for _, s := range []string{
		`{"input_tokens":5,"cache_creation_input_tokens":0,"cache_read_input_tokens":2,"output_tokens":1}`,
		`{"input_tokens":5,"cache_creation":{"ephemeral_5m_input_tokens":3,"ephemeral_1h_input_tokens":1},"service_tier":"standard"}`,
		`{"output_tokens":15,"cache_creation_input_tokens":null,"server_tool_use":{"web_search_requests":1}}`,
		`{"input_tokens":"5","output_tokens":-1}`,
		`{"input_tokens":5,"input_tokens":0}`,
		`{"cache_creation":{"ephemeral_5m_input_tokens":1,"ephemeral_5m_input_tokens":0}}`,
		`{"cache_creation":7}`,
		`{"cache_creation":null,"cache_creation":{}}`,
		`{"input_t\u006fkens":5}`,
		`{"input_tokens":1 "x":2}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u := gjson.Parse(s)
		start := UsageFields{Input: 7, Output: 3}
		a, g := start, start
		p, r := a.Apply(u)
		gp, gr := g.applyGJSON(u)
		if r != gr || r && (p != gp || a != g) {
			t.Fatalf("%q: Apply got %+v present %v readable %v, gjson %+v %v %v", s, a, p, r, g, gp, gr)
		}
	})
}
