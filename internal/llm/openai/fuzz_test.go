package openai

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// FuzzStreamReader fuzzes the chat stream reader, seeded with every SSE
// fixture and with usage objects no provider sends.
func FuzzStreamReader(f *testing.F) {
	llmtest.AddResponseSeeds(f, fixtures, ".sse")
	f.Add([]byte("data: {\"usage\":{\"prompt_tokens\":-5,\"completion_tokens\":1e400}}\n\n"), uint16(9))
	f.Add([]byte("data: {\"response\":{\"usage\":{\"input_tokens\":\"x\"}}}\r\r"), uint16(3))
	// A small buffer, so that fuzzed bodies reach the oversized-event
	// paths too.
	llmtest.FuzzReader(f, func() llm.UsageReader {
		return NewStreamReader("m", llm.ReaderOptions{MaxBuffer: 256}, ChatDeltaText)
	})
}

// FuzzResponsesStreamReader fuzzes the Responses API stream reader.
func FuzzResponsesStreamReader(f *testing.F) {
	llmtest.AddResponseSeeds(f, fixtures, ".sse")
	llmtest.FuzzReader(f, func() llm.UsageReader {
		return Responses{}.NewUsageReader(&llm.Request{Model: "m"}, "text/event-stream", llmtest.ReaderOptions())
	})
}

// FuzzJSONReader fuzzes the JSON reader, with a buffer small enough that
// seeds overflow it into the tail it keeps.
func FuzzJSONReader(f *testing.F) {
	llmtest.AddResponseSeeds(f, fixtures, ".json")
	llmtest.FuzzReader(f, func() llm.UsageReader {
		return llm.NewJSONReader("gpt-4o", llm.ReaderOptions{MaxBuffer: 1024}, ParseUsage, ChatReplyText)
	})
}

// FuzzParseRequest fuzzes request bodies through every OpenAI API, and
// checks what each accepts against the provider's reading (see
// TestDifferential).
func FuzzParseRequest(f *testing.F) {
	llmtest.FuzzRequests(f, fixtures, targets...)
}
