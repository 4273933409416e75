package bedrock

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestExplain: the estimate's parts are named by message and block; the
// tool prompt is Claude's alone.
func TestExplain(t *testing.T) {
	llmtest.CheckParts(t, Converse{}, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse", fixtures.Read(t, "converse_request.json"),
		"messages[0] user text: 9",
		"messages[0] user image: 1600 (the most an image costs on Claude, charged for every Bedrock model)",
		"system text: 9",
		"toolConfig.tools: 49 (JSON text)",
		"tool prompt: 346 (the system prompt Anthropic adds when tools are offered)",
		"message format overhead: 6 (3 a message)")
	llmtest.CheckParts(t, Converse{}, "/model/amazon.nova-pro-v1:0/converse", fixtures.Read(t, "converse_request.json"),
		"messages[0] user text: 9",
		"messages[0] user image: 1600 (the most an image costs on Claude, charged for every Bedrock model)",
		"system text: 9",
		"toolConfig.tools: 49 (JSON text)",
		"message format overhead: 6 (3 a message)")
	llmtest.CheckParts(t, Converse{}, "/model/m/converse-stream", fixtures.Read(t, "converse_stream_request.json"),
		"messages[0] user text: 6",
		"messages[1] assistant toolUse name: 3",
		"messages[1] assistant toolUse input: 6 (JSON text)",
		"messages[2] user toolResult json: 6 (JSON text)",
		"message format overhead: 9 (3 a message)")
}
