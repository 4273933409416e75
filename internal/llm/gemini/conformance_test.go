package gemini

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// fixtures holds the request and response fixtures, and cases.json,
// which says what each one must give.
const fixtures llmtest.Dir = "../../../testdata/gemini"

// TestConformance runs the wire-format suite over the fixtures.
func TestConformance(t *testing.T) {
	llmtest.Run(t, llmtest.Config{Dir: fixtures, APIs: map[string]llm.API{"generate_content": GenerateContent{}, "embed_content": EmbedContent{}}})
}
