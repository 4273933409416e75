package openai

import (
	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// Embeddings is the /v1/embeddings API: input only, no output, never
// streamed.
type Embeddings struct{}

var _ llm.API = Embeddings{}

// Name implements llm.API.
func (Embeddings) Name() string { return "openai.embeddings" }

// ParseRequest implements llm.API. The request has no output, so its cap
// is zero and counts as given: there is nothing to inject.
func (Embeddings) ParseRequest(_ string, body []byte, opts llm.ParseOptions) (llm.Request, error) {
	var out [maxFields]gjson.Result
	f, req, err := parseBody(body, embeddingsFields, opts, &out, "input")
	if err != nil {
		return req, err
	}
	tc := llm.NewTextCounter(opts.Counter, req.Model)
	count := tc.Count
	t := llm.NewTally(opts.Explain)
	_, err = promptTokens(f[0], "input", &t, count)
	req.InputTokens = t.Done("", "")
	req.CapGiven = true
	req.Stream = false
	return req, err
}

// Inject implements llm.API: an embeddings request needs no edit.
func (Embeddings) Inject([]byte, *llm.Request, llm.InjectOptions) ([]byte, error) {
	return nil, nil
}

// NewUsageReader implements llm.API. The usage object follows the
// vectors, at the very end of a body that can be many megabytes: the
// JSON reader keeps its tail.
func (Embeddings) NewUsageReader(req *llm.Request, _ string, opts llm.ReaderOptions) llm.UsageReader {
	return llm.NewJSONReader(req.Model, opts, ParseUsage, nil)
}

// RenderError implements llm.API.
func (Embeddings) RenderError(e llm.Error) llm.Reply { return RenderError(e) }
