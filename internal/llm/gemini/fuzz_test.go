package gemini

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// fuzzReader returns a maker of readers for contentType with a small
// buffer, so that fuzzed bodies reach the oversized-event paths too.
func fuzzReader(contentType string) func() llm.UsageReader {
	return func() llm.UsageReader {
		return GenerateContent{}.NewUsageReader(&llm.Request{Model: "m"}, contentType, llm.ReaderOptions{MaxBuffer: 512})
	}
}

// FuzzSSEReader fuzzes the alt=sse reader.
func FuzzSSEReader(f *testing.F) {
	llmtest.AddResponseSeeds(f, fixtures, ".sse")
	llmtest.FuzzReader(f, fuzzReader("text/event-stream"))
}

// FuzzJSONReader fuzzes the JSON scanner reader, on single responses and
// streamed arrays alike.
func FuzzJSONReader(f *testing.F) {
	llmtest.AddResponseSeeds(f, fixtures, ".json")
	llmtest.FuzzReader(f, fuzzReader("application/json"))
}

// FuzzParseRequest fuzzes request paths and bodies, and checks what it
// accepts against Google's reading (see TestDifferential).
func FuzzParseRequest(f *testing.F) {
	llmtest.FuzzRequestPaths(f, fixtures, targets[0])
}
