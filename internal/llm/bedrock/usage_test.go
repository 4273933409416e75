package bedrock

import (
	"bytes"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestAbsurdUsage: counts no provider sends are booked within
// 0..accounting.MaxTokens, and the parts of the input add up without
// overflowing; counts that are not unambiguously non-negative integers
// leave the usage unreadable.
func TestAbsurdUsage(t *testing.T) {
	const huge = accounting.MaxTokens
	llmtest.CheckUsage(t, Converse{}, "application/json", []llmtest.Usage{
		{Name: "1e30", Body: `{"usage":{"inputTokens":1e30,"outputTokens":5}}`,
			Want: accounting.Usage{InputTokens: huge, OutputTokens: 5}},
		{Name: "every part huge", Body: `{"usage":{"inputTokens":1.5e308,"cacheReadInputTokens":9223372036854775808,"cacheWriteInputTokens":1e30,"outputTokens":1e400}}`,
			Want: accounting.Usage{InputTokens: huge, CachedInputTokens: huge, OutputTokens: huge}},
		{Name: "integers with exponents", Body: `{"usage":{"inputTokens":10.0,"cacheWriteInputTokens":2e0,"outputTokens":3}}`,
			Want: accounting.Usage{InputTokens: 12, CacheWriteTokens: 2, OutputTokens: 3}},
		{Name: "negative", Body: `{"usage":{"inputTokens":1e30,"outputTokens":-5}}`, Unreadable: true},
		{Name: "fractions", Body: `{"usage":{"inputTokens":10.9,"cacheWriteInputTokens":2.5,"outputTokens":3.99}}`, Unreadable: true},
	})
}

// unreadableUsage are usage objects, and metadata payloads, whose usage
// clients read differently: each leaves the reader with no usage.
var unreadableUsage = []struct{ name, payload string }{
	{"a count as a string", `{"usage":{"inputTokens":"100","outputTokens":50}}`},
	{"a count of true", `{"usage":{"inputTokens":100,"outputTokens":true}}`},
	{"a count of null", `{"usage":{"inputTokens":100,"outputTokens":null}}`},
	{"a leading zero", `{"usage":{"inputTokens":00,"outputTokens":50}}`},
	{"a plus sign", `{"usage":{"inputTokens":+100,"outputTokens":50}}`},
	{"a bare fraction", `{"usage":{"inputTokens":.5,"outputTokens":50}}`},
	{"a count twice", `{"usage":{"inputTokens":100,"outputTokens":50,"inputTokens":0}}`},
	{"a cache count twice", `{"usage":{"inputTokens":100,"outputTokens":50,"cacheReadInputTokens":9,"cacheReadInputTokens":0}}`},
	{"usage twice", `{"usage":{"inputTokens":100,"outputTokens":50},"usage":{"inputTokens":0,"outputTokens":0}}`},
}

// TestUnreadableUsage: each of unreadableUsage, as a JSON body and as
// a stream's metadata event after a readable one, leaves no usage.
func TestUnreadableUsage(t *testing.T) {
	for _, tc := range unreadableUsage {
		t.Run(tc.name, func(t *testing.T) {
			r := Converse{}.NewUsageReader(&llm.Request{}, "application/json", llmtest.ReaderOptions())
			r.Write([]byte(tc.payload))
			if u, ok := r.Usage(); ok {
				t.Errorf("JSON: got usage %+v, want none", u)
			}
			s := NewStreamReader("m", llmtest.ReaderOptions())
			s.Write(metadataFrames(t, `{"usage":{"inputTokens":100,"outputTokens":50}}`, tc.payload))
			if u, ok := s.Usage(); ok || s.Final() {
				t.Errorf("stream: got usage %+v %v (final %v), want none", u, ok, s.Final())
			}
		})
	}
}

// metadataFrames frames payloads as metadata events, with the AWS SDK's
// own encoder.
func metadataFrames(t *testing.T, payloads ...string) []byte {
	t.Helper()
	enc := eventstream.NewEncoder()
	var out bytes.Buffer
	for _, p := range payloads {
		msg := eventstream.Message{Payload: []byte(p)}
		for _, h := range [][2]string{{":message-type", "event"}, {":event-type", "metadata"}} {
			msg.Headers = append(msg.Headers, eventstream.Header{Name: h[0], Value: eventstream.StringValue(h[1])})
		}
		if err := enc.Encode(&out, msg); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}
