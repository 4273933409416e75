package anthropic

import "github.com/tokenwarden/tokenwarden/internal/llm"

// SetModel implements llm.ModelSetter: the Messages API names the model
// in the body's "model".
func (Messages) SetModel(_ string, body []byte, model string) (string, []byte, error) {
	out, err := llm.SetField(body, messagesFields, model, "model")
	return "", out, err
}
