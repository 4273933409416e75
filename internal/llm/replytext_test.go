package llm_test

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/anthropic"
	"github.com/tokenwarden/tokenwarden/internal/llm/bedrock"
	"github.com/tokenwarden/tokenwarden/internal/llm/gemini"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
	"github.com/tokenwarden/tokenwarden/internal/llm/openai"
)

// TestObservedOutputIsGeneratedText: a non-streamed reply without a
// usage report is charged the text the model generated — content,
// tool-call arguments, the reasoning it shows — counted as text, never
// its JSON envelope. At four characters a token, each case's want is
// its generated text's length / 4, rounded up per piece.
func TestObservedOutputIsGeneratedText(t *testing.T) {
	// The reply: 574 bytes holding 4 characters of content,
	// which was charged 144 tokens (its bytes / 4).
	envelope := `{"id":"chatcmpl-C9xZ","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini-2024-07-18",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Rome","refusal":null,"annotations":[]},` +
		`"logprobs":null,"finish_reason":"stop"}],"service_tier":"default","system_fingerprint":"fp_560af6e559",` +
		`"metadata":{"note":"` + strings.Repeat("x", 574-331) + `"}}`
	tests := []struct {
		name        string
		api         llm.API
		contentType string
		body        string
		want        int64
	}{
		{"chat, a short answer in a long envelope", openai.Chat{}, "application/json", envelope, 1},
		{"chat, content, reasoning and a refusal", openai.Chat{}, "application/json",
			`{"choices":[{"message":{"content":"abcdefgh","reasoning_content":"abcd","refusal":"abcdef"}},` +
				`{"message":{"content":"abcd"}}]}`, 2 + 1 + 2 + 1},
		{"chat, tool calls", openai.Chat{}, "application/json",
			`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function",` +
				`"function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}}]}`, 4},
		{"chat, a legacy function call", openai.Chat{}, "application/json",
			`{"choices":[{"message":{"function_call":{"name":"f","arguments":"{\"a\":1}"}}}]}`, 2},
		{"completions, every choice", openai.Completions{}, "application/json",
			`{"object":"text_completion","choices":[{"text":"one two","index":0},{"text":"three","index":1}]}`, 2 + 2},
		{"responses, message, reasoning summary and a call", openai.Responses{}, "application/json",
			`{"object":"response","output":[` +
				`{"type":"reasoning","summary":[{"type":"summary_text","text":"abcdefgh"}]},` +
				`{"type":"message","content":[{"type":"output_text","text":"abcd","annotations":[]},{"type":"refusal","refusal":"ab"}]},` +
				`{"type":"function_call","name":"f","arguments":"{\"q\":\"x\"}"},` +
				`{"type":"custom_tool_call","name":"g","input":"abcdef"},` +
				`{"type":"web_search_call","id":"ws_1","status":"completed"}]}`, 2 + 1 + 1 + 3 + 2},
		{"anthropic, text, thinking and a tool call", anthropic.Messages{}, "application/json",
			`{"type":"message","role":"assistant","content":[` +
				`{"type":"thinking","thinking":"abcdefgh","signature":"` + strings.Repeat("s", 400) + `"},` +
				`{"type":"redacted_thinking","data":"` + strings.Repeat("r", 400) + `"},` +
				`{"type":"text","text":"abcd"},` +
				`{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}],"stop_reason":"tool_use"}`, 2 + 1 + 4},
		{"gemini, text and a function call", gemini.GenerateContent{}, "application/json",
			`{"candidates":[{"content":{"parts":[{"text":"abcdefgh"},{"functionCall":{"name":"f","args":{}}}],"role":"model"},` +
				`"finishReason":"STOP","safetyRatings":[{"category":"HARM_CATEGORY_HARASSMENT","probability":"NEGLIGIBLE"}]}]}`, 2 + 6},
		{"bedrock, text, reasoning and tool use", bedrock.Converse{}, "application/json",
			`{"metrics":{"latencyMs":1123},"output":{"message":{"role":"assistant","content":[` +
				`{"reasoningContent":{"reasoningText":{"text":"abcdefgh","signature":"` + strings.Repeat("s", 200) + `"}}},` +
				`{"text":"abcd"},{"toolUse":{"toolUseId":"t1","name":"f","input":{"city":"Paris"}}}]}},"stopReason":"tool_use"}`, 2 + 1 + 4},
		{"embeddings generate no text", openai.Embeddings{}, "application/json",
			`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.0023064255,-0.009327292]}],"model":"text-embedding-3-small"}`, 0},
	}
	if len(envelope) != 574 {
		t.Fatalf("the envelope case is %d bytes, want 574", len(envelope))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.api.NewUsageReader(&llm.Request{Model: "m"}, tc.contentType, llmtest.ReaderOptions())
			r.Write([]byte(tc.body))
			if _, ok := r.Usage(); ok {
				t.Fatal("got a usage report, want none")
			}
			if got := r.ObservedOutputTokens(); got != tc.want {
				t.Errorf("got observed %d, want %d (the body is %d bytes)", got, tc.want, len(tc.body))
			}
		})
	}
}

// TestObservedOutputOfAnOversizedReply: a reply larger than the reader
// keeps, of which only the tail is left, is charged by its size: its
// text can no longer be read.
func TestObservedOutputOfAnOversizedReply(t *testing.T) {
	body := `{"choices":[{"message":{"content":"` + strings.Repeat("a", 4000) + `"}}]}`
	opts := llmtest.ReaderOptions()
	opts.MaxBuffer = 1024
	r := openai.Chat{}.NewUsageReader(&llm.Request{Model: "m"}, "application/json", opts)
	r.Write([]byte(body))
	if got, want := r.ObservedOutputTokens(), llm.ObservedTokens(int64(len(body))); got != want {
		t.Errorf("got observed %d, want %d", got, want)
	}
}
