package llm_test

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/anthropic"
	"github.com/tokenwarden/tokenwarden/internal/llm/bedrock"
	"github.com/tokenwarden/tokenwarden/internal/llm/gemini"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
	"github.com/tokenwarden/tokenwarden/internal/llm/openai"
)

// TestUsageBound: what each API's request could have produced, which a
// usage report is held to: input up to the context window; output up to
// the cap the provider was sent times the choices where the cap includes
// reasoning (OpenAI's max_completion_tokens and max_output_tokens,
// Anthropic's max_tokens with thinking, Claude on Bedrock), and up to
// the window per choice where it was sent no cap or may think past it
// (Gemini's thinking, Nova's reasoning on Bedrock).
func TestUsageBound(t *testing.T) {
	const window = 100_000
	tests := []struct {
		name    string
		api     llm.API
		path    string
		body    string
		capSent bool
		wantOut int64
	}{
		{"chat, max_completion_tokens holds reasoning", openai.Chat{}, "/v1/chat/completions",
			`{"model":"o4-mini","max_completion_tokens":500,"reasoning_effort":"high","messages":[]}`, true, 500},
		{"chat, n choices", openai.Chat{}, "/v1/chat/completions",
			`{"model":"gpt-4o","max_tokens":50,"n":4,"messages":[]}`, true, 200},
		{"chat, the default cap injected", openai.Chat{}, "/v1/chat/completions",
			`{"model":"gpt-4o","messages":[]}`, true, 4096},
		{"chat, no cap sent", openai.Chat{}, "/v1/chat/completions",
			`{"model":"gpt-4o","n":2,"messages":[]}`, false, 2 * window},
		{"completions, best_of candidates", openai.Completions{}, "/v1/completions",
			`{"model":"gpt-3.5-turbo-instruct","prompt":"x","max_tokens":10,"n":2,"best_of":5}`, true, 50},
		{"responses, max_output_tokens holds reasoning", openai.Responses{}, "/v1/responses",
			`{"model":"o3","input":"x","max_output_tokens":700,"reasoning":{"effort":"high"}}`, true, 700},
		{"embeddings generate nothing", openai.Embeddings{}, "/v1/embeddings",
			`{"model":"text-embedding-3-small","input":"x"}`, true, 0},
		{"anthropic, thinking within max_tokens", anthropic.Messages{}, "/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":3000,"thinking":{"type":"enabled","budget_tokens":2000},"messages":[]}`, true, 3000},
		{"gemini, thinking off", gemini.GenerateContent{}, "/v1beta/models/gemini-2.5-flash:generateContent",
			`{"contents":[],"generationConfig":{"maxOutputTokens":64,"candidateCount":2,"thinkingConfig":{"thinkingBudget":0}}}`, true, 128},
		{"gemini, a thinking budget", gemini.GenerateContent{}, "/v1beta/models/gemini-2.5-flash:generateContent",
			`{"contents":[],"generationConfig":{"maxOutputTokens":64,"thinkingConfig":{"thinkingBudget":512}}}`, true, window},
		{"gemini, the model's own thinking", gemini.GenerateContent{}, "/v1beta/models/gemini-2.5-pro:generateContent",
			`{"contents":[],"generationConfig":{"maxOutputTokens":64}}`, true, window},
		{"bedrock, Claude's thinking within maxTokens", bedrock.Converse{}, "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse",
			`{"messages":[],"inferenceConfig":{"maxTokens":3000},"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":2000}}}`, true, 3000},
		{"bedrock, Nova's reasoning", bedrock.Converse{}, "/model/amazon.nova-2-lite-v1%3A0/converse",
			`{"messages":[],"inferenceConfig":{"maxTokens":3000},"additionalModelRequestFields":{"reasoningConfig":{"type":"enabled"}}}`, true, window},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := tc.api.ParseRequest(tc.path, []byte(tc.body), llmtest.ParseOptions())
			if err != nil {
				t.Fatal(err)
			}
			want := accounting.Usage{InputTokens: window, OutputTokens: tc.wantOut}
			if got := req.UsageBound(tc.capSent, window); got != want {
				t.Errorf("got bound %+v, want %+v", got, want)
			}
		})
	}
}
