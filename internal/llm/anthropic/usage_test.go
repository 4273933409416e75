package anthropic

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestAbsurdUsage: counts no provider sends are booked within
// 0..accounting.MaxTokens, and the parts of the input add up without
// overflowing.
func TestAbsurdUsage(t *testing.T) {
	const huge = accounting.MaxTokens
	cases := []llmtest.Usage{
		{Name: "1e30 and negative", Body: `{"usage":{"input_tokens":1e30,"output_tokens":-5}}`,
			Want: accounting.Usage{InputTokens: huge}},
		{Name: "every part huge", Body: `{"usage":{"input_tokens":1.5e308,"cache_creation_input_tokens":9223372036854775808,"cache_read_input_tokens":1e30,"output_tokens":1e400}}`,
			Want: accounting.Usage{InputTokens: huge, CachedInputTokens: huge, OutputTokens: huge}},
		{Name: "fractions", Body: `{"usage":{"input_tokens":10.9,"cache_read_input_tokens":2.5,"output_tokens":3.99}}`,
			Want: accounting.Usage{InputTokens: 12, CachedInputTokens: 2, OutputTokens: 3}},
		{Name: "breakdown huge", Body: `{"usage":{"input_tokens":1,"cache_creation":{"ephemeral_5m_input_tokens":1e30,"ephemeral_1h_input_tokens":-7},"output_tokens":1}}`,
			Want: accounting.Usage{InputTokens: huge, CacheWriteTokens: huge, OutputTokens: 1}},
	}
	llmtest.CheckUsage(t, Messages{}, "application/json", cases)
	for i := range cases {
		// The same counts in a stream's message_delta.
		cases[i].Body = "event: message_delta\ndata: {\"type\":\"message_delta\"," + cases[i].Body[1:] + "\n\n"
	}
	llmtest.CheckUsage(t, Messages{}, "text/event-stream", cases)
}
