package anthropic

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// fuzzReader returns a maker of readers for contentType with a small
// buffer, so that fuzzed bodies reach the oversized-event paths too.
func fuzzReader(contentType string) func() llm.UsageReader {
	return func() llm.UsageReader {
		return Messages{}.NewUsageReader(&llm.Request{Model: "m"}, contentType, llm.ReaderOptions{MaxBuffer: 512})
	}
}

// FuzzStreamReader fuzzes the SSE reader, seeded with every SSE fixture
// and with usage no provider sends.
func FuzzStreamReader(f *testing.F) {
	llmtest.AddResponseSeeds(f, fixtures, ".sse")
	f.Add([]byte("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":-3,\"input_tokens\":null}}\n\n"), uint16(20))
	llmtest.FuzzReader(f, fuzzReader("text/event-stream"))
}

// FuzzJSONReader fuzzes the JSON reader.
func FuzzJSONReader(f *testing.F) {
	llmtest.AddResponseSeeds(f, fixtures, ".json")
	llmtest.FuzzReader(f, fuzzReader("application/json"))
}

// FuzzParseRequest fuzzes Messages request bodies, and checks what it
// accepts against Anthropic's reading (see TestDifferential).
func FuzzParseRequest(f *testing.F) {
	llmtest.FuzzRequests(f, fixtures, target)
}
