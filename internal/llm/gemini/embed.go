package gemini

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// The embedding methods, as their paths end: …/models/{model}:embedContent
// and :batchEmbedContents, on the Gemini API and on Vertex AI.
const (
	EmbedMethod      = ":embedContent"
	BatchEmbedMethod = ":batchEmbedContents"
)

// EmbedContent is the embedContent and batchEmbedContents API. An
// embedding is billed on its input alone: the request reserves its input
// estimate and no output. The Gemini API's reply reports no usage, and
// the request settles on that estimate; Vertex AI's carries a
// usageMetadata (promptTokenCount), which settles it.
type EmbedContent struct{}

var _ llm.API = EmbedContent{}

// Name implements llm.API.
func (EmbedContent) Name() string { return "gemini.embed_content" }

// MatchEmbedPath reports whether a request path calls embedContent or
// batchEmbedContents. A path that ends in the method but names no model
// matches too: its parse refuses it.
func MatchEmbedPath(path string) bool {
	p := llm.CleanPath(path)
	return strings.HasSuffix(p, EmbedMethod) || strings.HasSuffix(p, BatchEmbedMethod)
}

// EmbedModelFromPath returns the model an embedding path names (the
// segment before the method, as for generateContent); such a call never
// streams.
func EmbedModelFromPath(path string) (model string, stream bool, ok bool) {
	p := llm.CleanPath(path)
	switch {
	case strings.HasSuffix(p, EmbedMethod):
		p = p[:len(p)-len(EmbedMethod)]
	case strings.HasSuffix(p, BatchEmbedMethod):
		p = p[:len(p)-len(BatchEmbedMethod)]
	default:
		return "", false, false
	}
	model = p[strings.LastIndexByte(p, '/')+1:]
	return model, false, model != ""
}

// The fields EmbedContent reads: a request's content and title, and a
// batch's requests, each one such request (with its model).
var (
	embedFields      = protoNest(protoFields("title", "model"), "content", contentFields)
	batchEmbedFields = protoNest(llm.NewFields(), "requests", embedFields)
)

// ParseRequest implements llm.API. The input is the content's parts and
// the title, of the request or of each request of a batch; there is no
// output.
func (EmbedContent) ParseRequest(path string, body []byte, opts llm.ParseOptions) (llm.Request, error) {
	batch := strings.HasSuffix(llm.CleanPath(path), BatchEmbedMethod)
	fields, names := embedFields, []string{"content", "title"}
	if batch {
		fields, names = batchEmbedFields, []string{"requests"}
	}
	var buf [2]gjson.Result
	req, f, err := llm.NewPathRequest(path, body, fields, EmbedModelFromPath, buf[:0], names...)
	if err != nil {
		return req, err
	}
	tc := llm.NewTextCounter(opts.Counter, req.Model)
	count := tc.Count
	t := llm.NewTally(opts.Explain)
	var fileData bool
	if !batch {
		fileData, err = embedTokens(f[0], f[1], &t, count)
	} else {
		if !f[0].IsArray() {
			return req, errors.New("requests must be an array")
		}
		llm.ForEach(f[0], func(i, r gjson.Result) bool {
			if !r.IsObject() {
				err = errors.New("each request must be an object")
				return false
			}
			outer := t.Enter("requests", int(i.Num), r)
			var fd bool
			fd, err = embedTokens(r.Get("content"), r.Get("title"), &t, count)
			fileData = fileData || fd
			t.Leave(outer)
			return err == nil
		})
	}
	if err != nil {
		return req, err
	}
	req.InputTokens = t.Done("content format overhead", "3 a content, an approximation: Gemini's is not published")
	if fileData {
		req.Notes = "fileData parts are counted as one image: their size is unknown"
	}
	return req, nil
}

// embedTokens counts one embedding request's content and title into t,
// and reports a fileData part.
func embedTokens(content, title gjson.Result, t *llm.Tally, count func(string) int64) (fileData bool, err error) {
	if !content.IsObject() {
		return false, errors.New("content must be an object")
	}
	if _, err := llm.OptionalString(title, "title"); err != nil {
		return false, err
	}
	t.Overhead(tokensPerContent)
	fileData = partsTokens(content.Get("parts"), t, count)
	if title.Str != "" {
		t.Add("title", count(title.Str))
	}
	return fileData, nil
}

// Inject implements llm.API: an embedding has no output to cap.
func (EmbedContent) Inject([]byte, *llm.Request, llm.InjectOptions) ([]byte, error) { return nil, nil }

// NewUsageReader implements llm.API: a JSON reply, whose usageMetadata
// (Vertex AI's) the JSON scanner captures.
func (EmbedContent) NewUsageReader(req *llm.Request, _ string, opts llm.ReaderOptions) llm.UsageReader {
	opts.MaxBuffer = opts.BufferSize()
	return NewJSONReader(req.Model, opts)
}

// RenderError implements llm.API with Google's error shape.
func (EmbedContent) RenderError(e llm.Error) llm.Reply { return RenderError(e) }
