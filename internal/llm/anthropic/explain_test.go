package anthropic

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestExplain: the estimate's parts are named by message and block, and
// the media and the tool prompt say how they were charged.
func TestExplain(t *testing.T) {
	llmtest.CheckParts(t, Messages{}, "/v1/messages", fixtures.Read(t, "messages_request_blocks.json"),
		"system text: 12",
		"messages[0] user document title: 2",
		"messages[0] user document text: 11",
		"messages[0] user document PDF: 1600 (96 bytes, a token per 10 bytes, at least one image)",
		"messages[0] user image: 1600 (the most an image costs on Claude)",
		"messages[0] user text: 15",
		"messages[1] assistant thinking: 11",
		"messages[1] assistant tool_use name: 3",
		"messages[1] assistant tool_use input: 8 (JSON text)",
		"messages[2] user tool_result text: 6",
		"tools: 61 (JSON text)",
		"tool prompt: 346 (the system prompt Anthropic adds when tools are offered)",
		"message format overhead: 12 (3 a message, an approximation: Anthropic's is not published)")
}
