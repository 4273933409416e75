package gemini

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestAbsurdUsage: counts no provider sends are booked within
// 0..accounting.MaxTokens, in both names of each field; counts that are
// not unambiguously non-negative integers, or are there twice, leave the
// usage unreadable.
func TestAbsurdUsage(t *testing.T) {
	const huge = accounting.MaxTokens
	cases := []llmtest.Usage{
		{Name: "1e30", Body: `{"usageMetadata":{"promptTokenCount":1e30,"candidatesTokenCount":5}}`,
			Want: accounting.Usage{InputTokens: huge, OutputTokens: 5}},
		{Name: "negative", Body: `{"usageMetadata":{"promptTokenCount":1e30,"candidatesTokenCount":-5}}`, Unreadable: true},
		{Name: "every count huge", Body: `{"usage_metadata":{"prompt_token_count":1.5e308,"tool_use_prompt_token_count":9223372036854775808,"cached_content_token_count":1e400,"candidates_token_count":1e30,"thoughts_token_count":1e30}}`,
			Want: accounting.Usage{InputTokens: huge, CachedInputTokens: huge, OutputTokens: huge}},
		{Name: "integers with exponents", Body: `{"usageMetadata":{"promptTokenCount":10.0,"cachedContentTokenCount":2e0,"candidatesTokenCount":3}}`,
			Want: accounting.Usage{InputTokens: 10, CachedInputTokens: 2, OutputTokens: 3}},
		{Name: "fractions", Body: `{"usageMetadata":{"promptTokenCount":10.9,"cachedContentTokenCount":2.5,"candidatesTokenCount":3.99}}`, Unreadable: true},
		{Name: "a count as a string", Body: `{"usageMetadata":{"promptTokenCount":10,"thoughtsTokenCount":"7"}}`, Unreadable: true},
		{Name: "a count of true", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":true}}`, Unreadable: true},
		{Name: "a leading zero", Body: `{"usageMetadata":{"promptTokenCount":00,"candidatesTokenCount":5}}`, Unreadable: true},
		{Name: "a plus sign", Body: `{"usageMetadata":{"promptTokenCount":+100,"candidatesTokenCount":5}}`, Unreadable: true},
		{Name: "a bare fraction", Body: `{"usageMetadata":{"promptTokenCount":.5,"candidatesTokenCount":5}}`, Unreadable: true},
		{Name: "a count twice", Body: `{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":5,"promptTokenCount":0}}`, Unreadable: true},
		{Name: "a count under both names", Body: `{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":5,"prompt_token_count":0}}`, Unreadable: true},
		{Name: "usageMetadata twice", Body: `{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":5},"usageMetadata":{"promptTokenCount":0}}`, Unreadable: true},
		{Name: "usageMetadata twice, the first under an escaped name", Body: `{"usage\u004detadata":{"promptTokenCount":1000,"candidatesTokenCount":1000},` +
			`"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}`, Unreadable: true},
		{Name: "usageMetadata under an escaped name", Body: `{"usage\u004detadata":{"promptTokenCount":100,"candidatesTokenCount":5}}`,
			Want: accounting.Usage{InputTokens: 100, OutputTokens: 5}},
		{Name: "usageMetadata under both names", Body: `{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":5},"usage_metadata":{}}`, Unreadable: true},
	}
	llmtest.CheckUsage(t, GenerateContent{}, "application/json", cases)
	for i := range cases {
		cases[i].Body = "data: " + cases[i].Body + "\r\n\r\n"
	}
	llmtest.CheckUsage(t, GenerateContent{}, "text/event-stream", cases)
}

// TestModalityUsage: the AUDIO part of the prompt and the AUDIO and IMAGE
// parts of the candidates are read from the modality details, summed per
// modality and kept within the counts they are part of.
func TestModalityUsage(t *testing.T) {
	cases := []llmtest.Usage{
		{Name: "audio in, image out", Body: `{"usageMetadata":{"promptTokenCount":500,"candidatesTokenCount":1300,` +
			`"promptTokensDetails":[{"modality":"TEXT","tokenCount":20},{"modality":"AUDIO","tokenCount":480}],` +
			`"candidatesTokensDetails":[{"modality":"IMAGE","tokenCount":1290},{"modality":"TEXT","tokenCount":10}]}}`,
			Want: accounting.Usage{InputTokens: 500, AudioInputTokens: 480, OutputTokens: 1300, ImageOutputTokens: 1290}},
		{Name: "proto names, audio out, repeated modality", Body: `{"usage_metadata":{"prompt_token_count":10,"candidates_token_count":100,` +
			`"candidates_tokens_details":[{"modality":"AUDIO","token_count":60},{"modality":"AUDIO","token_count":30}]}}`,
			Want: accounting.Usage{InputTokens: 10, OutputTokens: 100, AudioOutputTokens: 90}},
		{Name: "details beyond the counts", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,` +
			`"promptTokensDetails":[{"modality":"AUDIO","tokenCount":1e30}],` +
			`"candidatesTokensDetails":[{"modality":"IMAGE","tokenCount":1e30},{"modality":"IMAGE","tokenCount":1e30}]}}`,
			Want: accounting.Usage{InputTokens: 10, AudioInputTokens: 10, OutputTokens: 5, ImageOutputTokens: 5}},
		{Name: "details of null", Body: `{"usageMetadata":{"promptTokenCount":10,"promptTokensDetails":null}}`,
			Want: accounting.Usage{InputTokens: 10}},
		{Name: "details not a list", Body: `{"usageMetadata":{"promptTokenCount":10,"promptTokensDetails":{"modality":"AUDIO"}}}`, Unreadable: true},
		{Name: "details a number", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokensDetails":7}}`, Unreadable: true},
		{Name: "details of the wrong shape", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokensDetails":[7]}}`, Unreadable: true},
		{Name: "a detail count twice", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":100,` +
			`"candidatesTokensDetails":[{"modality":"AUDIO","tokenCount":60,"token_count":0}]}}`, Unreadable: true},
		{Name: "a modality twice", Body: `{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":5,` +
			`"promptTokensDetails":[{"modality":"TEXT","modality":"AUDIO","tokenCount":100}]}}`, Unreadable: true},
		{Name: "a detail count as a string", Body: `{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":100,` +
			`"candidatesTokensDetails":[{"modality":"AUDIO","tokenCount":"60"}]}}`, Unreadable: true},
	}
	llmtest.CheckUsage(t, GenerateContent{}, "application/json", cases)
	for i := range cases {
		cases[i].Body = "data: " + cases[i].Body + "\r\n\r\n"
	}
	llmtest.CheckUsage(t, GenerateContent{}, "text/event-stream", cases)
}
