package openai

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestExplain: each API names the parts of its estimate, and says how the
// ones that are not plain text were counted.
func TestExplain(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		llmtest.CheckParts(t, Chat{}, "/v1/chat/completions", fixtures.Read(t, "chat_request.json"),
			"messages[0] system text: 20",
			"messages[1] user name: 2",
			"messages[1] user text: 9",
			"messages[2] assistant text: 7",
			"messages[3] user text: 5",
			"messages[3] user image_url: 2833 (detail low, size unknown)",
			"tools: 58 (JSON text)",
			"chat format overhead: 20 (3 a message, 1 a role, 1 a name, 3 to prime the reply)")
	})
	t.Run("chat parts", func(t *testing.T) {
		body := `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` +
			llmtest.PNGDataURL(t, 1024, 768) + `","detail":"high"}},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},{"type":"x y"}]},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c"}]}],"functions":[{"name":"f"}]}`
		llmtest.CheckParts(t, Chat{}, "/v1/chat/completions", []byte(body),
			"messages[0] user image_url: 765 (detail high, 1024×768)",
			"messages[0] user input_audio: 17 (JSON text)",
			`messages[0] user "x y": 4 (JSON text)`,
			"messages[1] assistant tool_calls: 3 (JSON text)",
			"functions: 4 (JSON text)",
			"chat format overhead: 11 (3 a message, 1 a role, 1 a name, 3 to prime the reply)")
	})
	t.Run("responses", func(t *testing.T) {
		llmtest.CheckParts(t, Responses{}, "/v1/responses", fixtures.Read(t, "responses_request_items.json"),
			"input[0] user input_text: 15",
			"input[0] user input_image: 2642 (detail low, size unknown)",
			"input[1] function_call name: 3",
			"input[1] function_call arguments: 4",
			"input[2] function_call_output text: 8",
			"tools: 50 (JSON text)",
			"responses format overhead: 16 (3 an item, 1 a role, 3 to prime the reply)")
	})
	t.Run("completions", func(t *testing.T) {
		llmtest.CheckParts(t, Completions{}, "/v1/completions", []byte(`{"model":"m","prompt":["abcd","abcdefgh"],"suffix":"abcd"}`),
			"prompt[0]: 1",
			"prompt[1]: 2",
			"suffix: 2 (once for each of 2 prompts)")
	})
	t.Run("embeddings", func(t *testing.T) {
		llmtest.CheckParts(t, Embeddings{}, "/v1/embeddings", fixtures.Read(t, "embeddings_request_tokens.json"),
			"input: 4 (token ids)")
	})
}
