package bedrock

import (
	"encoding/json"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// ErrorType returns the AWS error code tokenwarden's replies of a kind
// carry in x-amzn-errortype. The AWS SDKs decide retries from this code
// (ThrottlingException and ServiceUnavailableException are retried, with
// backoff) and map it to their modelled error types.
func ErrorType(k llm.ErrorKind) string {
	switch k {
	case llm.RateLimited:
		return "ThrottlingException"
	case llm.Unavailable:
		return "ServiceUnavailableException"
	case llm.Unauthenticated, llm.Forbidden:
		return "AccessDeniedException"
	}
	return "ValidationException"
}

// RenderError implements llm.API with AWS's REST-JSON error shape: a
// {"message"} body and the error code in x-amzn-errortype.
func (Converse) RenderError(e llm.Error) llm.Reply { return RenderError(e) }

// RenderError renders e in AWS's error shape.
func RenderError(e llm.Error) llm.Reply {
	body, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{e.Message})
	return llm.Reply{Body: body, Headers: [][2]string{{"x-amzn-errortype", ErrorType(e.Kind)}}}
}
