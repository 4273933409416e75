package bedrock

import (
	"bytes"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

func BenchmarkUsage(b *testing.B) {
	const model = "anthropic.claude-3-5-sonnet-20240620-v1:0"
	b.Run("eventstream", func(b *testing.B) {
		llmtest.BenchReader(b, Converse{}, model, ContentType, bytes.Repeat(fixtures.Read(b, "converse_stream_tool.eventstream"), 100))
	})
	b.Run("json", func(b *testing.B) {
		llmtest.BenchReader(b, Converse{}, model, "application/json", fixtures.Read(b, "converse.json"))
	})
}

func TestStreamAllocsPerEvent(t *testing.T) {
	r := Converse{}.NewUsageReader(&llm.Request{Model: "m"}, ContentType, llmtest.ReaderOptions())
	// No JSON escapes in this fixture: see llmtest.CheckNoAllocs.
	llmtest.CheckNoAllocs(t, "eventstream", r, fixtures.Read(t, "converse_stream.eventstream"))
}

// BenchmarkParseRequest measures estimation of a 1 MB prompt.
func BenchmarkParseRequest(b *testing.B) {
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"` + llmtest.LongPrompt() +
		`"}]}],"inferenceConfig":{"maxTokens":5}}`)
	llmtest.BenchParse(b, Converse{}, "/model/m/converse", body)
}

// TestParseAllocs: without an explanation, the parse allocates nothing
// per message or block.
func TestParseAllocs(t *testing.T) {
	llmtest.CheckParseAllocs(t, Converse{}, "/model/anthropic.claude-3-haiku/converse", func(n int) []byte {
		return []byte(`{"system":[{"text":"Terse."}],"messages":[` +
			llmtest.Repeat(`{"role":"user","content":[{"text":"hi"},{"image":{"format":"png","source":{"bytes":"AAAA"}}},`+
				`{"document":{"format":"pdf","name":"d","source":{"bytes":"AAAA"}}},{"toolResult":{"toolUseId":"x","content":[{"text":"42"}]}},{"cachePoint":{"type":"default"}}]},`+
				`{"role":"assistant","content":[{"toolUse":{"toolUseId":"x","name":"f","input":{}}},{"reasoningContent":{"reasoningText":{"text":"hmm"}}}]}`, n) +
			`],"toolConfig":{"tools":[{"toolSpec":{"name":"f"}}]},"inferenceConfig":{"maxTokens":100}}`)
	})
}
