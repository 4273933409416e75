package openai

import "github.com/tokenwarden/tokenwarden/internal/llm"

// The OpenAI APIs name the model in the body's "model" (an Azure
// deployment path names it in the path too; extproc does not downgrade
// those, whose model the deployment decides).

// SetModel implements llm.ModelSetter.
func (Chat) SetModel(_ string, body []byte, model string) (string, []byte, error) {
	return setModel(body, chatFields, model)
}

// SetModel implements llm.ModelSetter.
func (Completions) SetModel(_ string, body []byte, model string) (string, []byte, error) {
	return setModel(body, completionsFields, model)
}

// SetModel implements llm.ModelSetter.
func (Embeddings) SetModel(_ string, body []byte, model string) (string, []byte, error) {
	return setModel(body, embeddingsFields, model)
}

// SetModel implements llm.ModelSetter.
func (Responses) SetModel(_ string, body []byte, model string) (string, []byte, error) {
	return setModel(body, responsesFields, model)
}

func setModel(body []byte, fields *llm.Fields, model string) (string, []byte, error) {
	out, err := llm.SetField(body, fields, model, "model")
	return "", out, err
}
