package openai

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// fixtures holds the request and response fixtures, and cases.json,
// which says what each one must give.
const fixtures llmtest.Dir = "../../../testdata/openai"

// apis names the API values cases.json refers to.
var apis = map[string]llm.API{
	"chat":        Chat{},
	"completions": Completions{},
	"embeddings":  Embeddings{},
	"responses":   Responses{},
}

// TestConformance runs the wire-format suite over the fixtures.
func TestConformance(t *testing.T) {
	llmtest.Run(t, llmtest.Config{Dir: fixtures, APIs: apis})
}
