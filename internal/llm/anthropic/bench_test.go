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
