package gemini

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestAbsurdUsage: counts no provider sends are booked within
// 0..accounting.MaxTokens, in both names of each field.
func TestAbsurdUsage(t *testing.T) {
	const huge = accounting.MaxTokens
	cases := []llmtest.Usage{
		{Name: "1e30 and negative", Body: `{"usageMetadata":{"promptTokenCount":1e30,"candidatesTokenCount":-5}}`,
			Want: accounting.Usage{InputTokens: huge}},
		{Name: "every count huge", Body: `{"usage_metadata":{"prompt_token_count":1.5e308,"tool_use_prompt_token_count":9223372036854775808,"cached_content_token_count":1e400,"candidates_token_count":1e30,"thoughts_token_count":1e30}}`,
			Want: accounting.Usage{InputTokens: huge, CachedInputTokens: huge, OutputTokens: huge}},
		{Name: "fractions", Body: `{"usageMetadata":{"promptTokenCount":10.9,"cachedContentTokenCount":2.5,"candidatesTokenCount":3.99,"thoughtsTokenCount":"7"}}`,
			Want: accounting.Usage{InputTokens: 10, CachedInputTokens: 2, OutputTokens: 3}},
	}
	llmtest.CheckUsage(t, GenerateContent{}, "application/json", cases)
	for i := range cases {
		cases[i].Body = "data: " + cases[i].Body + "\r\n\r\n"
	}
	llmtest.CheckUsage(t, GenerateContent{}, "text/event-stream", cases)
}
