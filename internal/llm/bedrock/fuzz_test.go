package bedrock

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// fuzzReader returns a maker of readers for contentType with a small
// buffer, so that fuzzed bodies reach the oversized-frame paths too.
func fuzzReader(contentType string) func() llm.UsageReader {
	return func() llm.UsageReader {
		return Converse{}.NewUsageReader(&llm.Request{Model: "m"}, contentType, llm.ReaderOptions{MaxBuffer: 256})
	}
}

// FuzzStreamReader fuzzes the event stream reader, seeded with every
// binary fixture.
func FuzzStreamReader(f *testing.F) {
	llmtest.AddResponseSeeds(f, fixtures, ".eventstream")
	llmtest.FuzzReader(f, fuzzReader(ContentType))
}

// FuzzJSONReader fuzzes the JSON reader.
func FuzzJSONReader(f *testing.F) {
	llmtest.AddResponseSeeds(f, fixtures, ".json")
	llmtest.FuzzReader(f, fuzzReader("application/json"))
}

// FuzzParseRequest fuzzes request paths and bodies, and checks what it
// accepts against Bedrock's reading (see TestDifferential).
func FuzzParseRequest(f *testing.F) {
	llmtest.FuzzRequestPaths(f, fixtures, target)
}
