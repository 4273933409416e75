package bedrock

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
	llmtest.CheckUsage(t, Converse{}, "application/json", []llmtest.Usage{
		{Name: "1e30 and negative", Body: `{"usage":{"inputTokens":1e30,"outputTokens":-5}}`,
			Want: accounting.Usage{InputTokens: huge}},
		{Name: "every part huge", Body: `{"usage":{"inputTokens":1.5e308,"cacheReadInputTokens":9223372036854775808,"cacheWriteInputTokens":1e30,"outputTokens":1e400}}`,
			Want: accounting.Usage{InputTokens: huge, CachedInputTokens: huge, OutputTokens: huge}},
		{Name: "fractions", Body: `{"usage":{"inputTokens":10.9,"cacheWriteInputTokens":2.5,"outputTokens":3.99}}`,
			Want: accounting.Usage{InputTokens: 12, CacheWriteTokens: 2, OutputTokens: 3}},
	})
}
