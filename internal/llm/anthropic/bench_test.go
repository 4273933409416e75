package anthropic

import (
	"bytes"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

func BenchmarkUsage(b *testing.B) {
	const model = "claude-sonnet-4-5"
	b.Run("stream", func(b *testing.B) {
		llmtest.BenchReader(b, Messages{}, model, "text/event-stream", bytes.Repeat(fixtures.Read(b, "messages_stream.sse"), 100))
	})
	b.Run("json", func(b *testing.B) {
		llmtest.BenchReader(b, Messages{}, model, "application/json", fixtures.Read(b, "messages_1h.json"))
	})
}

func TestStreamAllocsPerEvent(t *testing.T) {
	r := Messages{}.NewUsageReader(&llm.Request{Model: "m"}, "text/event-stream", llmtest.ReaderOptions())
	llmtest.CheckNoAllocs(t, "stream", r, fixtures.Read(t, "messages_stream.sse"))
}

// BenchmarkParseRequest measures estimation of a 1 MB prompt.
func BenchmarkParseRequest(b *testing.B) {
	body := []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"` +
		llmtest.LongPrompt() + `"}]}]}`)
	llmtest.BenchParse(b, Messages{}, "/v1/messages", body)
}

// TestParseAllocs: without an explanation, the parse allocates nothing
// per message or block.
func TestParseAllocs(t *testing.T) {
	llmtest.CheckParseAllocs(t, Messages{}, "/v1/messages", func(n int) []byte {
		return []byte(`{"model":"claude-sonnet-4-5","max_tokens":100,"system":[{"type":"text","text":"Terse."}],"messages":[` +
			llmtest.Repeat(`{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{"type":"url","url":"u"}},`+
				`{"type":"document","title":"t","source":{"type":"text","data":"doc"}},{"type":"tool_result","tool_use_id":"x","content":[{"type":"text","text":"42"}]}]},`+
				`{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"tool_use","id":"x","name":"f","input":{}}]}`, n) +
			`],"tools":[{"name":"f","input_schema":{}}]}`)
	})
}
