package openai

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestAbsurdUsage: counts no provider sends are booked within
// 0..accounting.MaxTokens, in JSON bodies and streams alike.
func TestAbsurdUsage(t *testing.T) {
	const huge = accounting.MaxTokens
	cases := []llmtest.Usage{
		{Name: "1e30 and negative", Body: `{"usage":{"prompt_tokens":1e30,"completion_tokens":-5}}`,
			Want: accounting.Usage{InputTokens: huge}},
		{Name: "beyond float64 and int64", Body: `{"usage":{"prompt_tokens":1.5e308,"completion_tokens":9223372036854775808,"prompt_tokens_details":{"cached_tokens":1e400}}}`,
			Want: accounting.Usage{InputTokens: huge, CachedInputTokens: huge, OutputTokens: huge}},
		{Name: "fractions", Body: `{"usage":{"input_tokens":10.9,"output_tokens":2.5,"input_tokens_details":{"cached_tokens":3.99}}}`,
			Want: accounting.Usage{InputTokens: 10, CachedInputTokens: 3, OutputTokens: 2}},
		{Name: "strings", Body: `{"usage":{"prompt_tokens":"12","completion_tokens":null}}`, Want: accounting.Usage{}},
		{Name: "cached above input", Body: `{"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":1e30}}}`,
			Want: accounting.Usage{InputTokens: 5, CachedInputTokens: 5, OutputTokens: 1}},
	}
	llmtest.CheckUsage(t, Chat{}, "application/json", cases)
	for i := range cases {
		cases[i].Body = "data: " + cases[i].Body + "\n\ndata: [DONE]\n\n"
	}
	llmtest.CheckUsage(t, Chat{}, "text/event-stream", cases)
}
