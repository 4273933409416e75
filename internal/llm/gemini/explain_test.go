package gemini

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestExplain: the estimate's parts are named by content and part, and
// media say how they were charged.
func TestExplain(t *testing.T) {
	llmtest.CheckParts(t, GenerateContent{}, "/v1beta/models/gemini-2.5-flash:generateContent", fixtures.Read(t, "generate_request.json"),
		"contents[0] user text: 12",
		"contents[0] user inlineData: 258 (72 bytes, 5 tokens a KiB, at least 258)",
		"contents[1] model functionCall: 12 (JSON text)",
		"contents[2] user functionResponse: 13 (JSON text)",
		"systemInstruction text: 13",
		"tools: 44 (JSON text)",
		"content format overhead: 12 (3 a content, an approximation: Gemini's is not published)")
	llmtest.CheckParts(t, GenerateContent{}, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", fixtures.Read(t, "stream_request_snake.json"),
		"contents[0] user text: 9",
		"contents[0] user fileData: 258 (its size is unknown: charged as one image)",
		"systemInstruction text: 8",
		"content format overhead: 6 (3 a content, an approximation: Gemini's is not published)")
}
