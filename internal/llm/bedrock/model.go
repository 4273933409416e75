package bedrock

import (
	"strings"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// SetModel implements llm.ModelSetter: Bedrock names the model in the
// path, /model/{modelId}/converse, so the path changes and the body does
// not. "/model/" and the method must be spelt plainly in the raw path;
// the model id between them, however spelt (an ARN is sent escaped), is
// replaced whole, escaped as one segment.
//
// Bedrock requests are signed (SigV4) over the path: a downgraded
// request reaches Bedrock only through a gateway that signs after
// tokenwarden, as it must anyway for a caller that holds no AWS key.
func (Converse) SetModel(rawPath string, _ []byte, model string) (string, []byte, error) {
	p := rawPath
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	suffix := "/converse"
	if strings.HasSuffix(p, "/converse-stream") {
		suffix = "/converse-stream"
	}
	i := strings.Index(p, "/model/")
	if i < 0 {
		return "", nil, llm.ErrModelNotSettable
	}
	out, err := llm.ReplacePathModel(rawPath, i+len("/model/"), suffix, model, ModelFromPath)
	return out, nil, err
}
