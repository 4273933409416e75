package gemini

import (
	"strings"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// SetModel implements llm.ModelSetter: Gemini names the model in the
// path, …/models/{model}:generateContent, so the path changes and the
// body does not. The method must be spelt plainly in the raw path (not
// %3AgenerateContent); the model segment, however spelt, is replaced
// whole. A Gemini model id has no ':' or '/', which would move the
// method or the segment.
func (GenerateContent) SetModel(rawPath string, _ []byte, model string) (string, []byte, error) {
	if strings.ContainsAny(model, ":/") {
		return "", nil, llm.ErrModelNotSettable
	}
	p := rawPath
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	suffix := generateSuffix
	if strings.HasSuffix(p, streamSuffix) {
		suffix = streamSuffix
	}
	at := strings.LastIndexByte(p[:max(0, len(p)-len(suffix))], '/') + 1
	if at == 0 {
		return "", nil, llm.ErrModelNotSettable
	}
	out, err := llm.ReplacePathModel(rawPath, at, suffix, model, ModelFromPath)
	return out, nil, err
}
