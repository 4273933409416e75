package openai

import (
	"errors"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

// parseBody validates a request body and reads, in one pass, the fields
// every OpenAI endpoint has (the model and the stream flag) and the named
// ones, which it returns in order.
func parseBody(body []byte, names ...string) (fields []gjson.Result, req llm.Request, err error) {
	if err = llm.ValidObject(body); err != nil {
		return nil, req, err
	}
	f := llm.TopFields(gjson.Parse(llm.View(body)), append([]string{"model", "stream"}, names...)...)
	model, stream := f[0], f[1]
	if model.Type != gjson.String || model.Str == "" {
		return nil, req, errors.New("model must be a non-empty string")
	}
	req.Model = model.Str
	if stream.Type != gjson.Null && !stream.IsBool() {
		return nil, req, errors.New("stream must be a boolean")
	}
	req.Stream = stream.Bool()
	req.Choices = 1
	return f[2:], req, nil
}

// promptTokens counts a prompt that may be a string, an array of strings,
// an array of token ids or an array of such arrays (completions and
// embeddings take all four). Token ids count one each, exactly. It also
// returns how many separate prompts the value holds: each gets its own
// completions.
func promptTokens(v gjson.Result, field string, count func(string) int64) (tokens, prompts int64, err error) {
	switch {
	case v.Type == gjson.String:
		return count(v.Str), 1, nil
	case v.IsArray():
	default:
		return 0, 0, fmt.Errorf("%s must be a string or an array", field)
	}
	ints := false
	v.ForEach(func(_, item gjson.Result) bool {
		switch {
		case item.Type == gjson.String:
			tokens += count(item.Str)
			prompts++
		case item.Type == gjson.Number:
			tokens++
			ints = true
		case item.IsArray():
			item.ForEach(func(_, id gjson.Result) bool {
				if id.Type != gjson.Number {
					err = fmt.Errorf("%s token arrays must hold integers", field)
					return false
				}
				tokens++
				return true
			})
			prompts++
		default:
			err = fmt.Errorf("%s items must be strings, integers or integer arrays", field)
		}
		return err == nil
	})
	if ints {
		// A flat array of token ids is one prompt.
		prompts++
	}
	return tokens, max(prompts, 1), err
}

// outputCap reads an optional output-cap field.
func outputCap(v gjson.Result, field string) (int64, bool, error) {
	return llm.PositiveInt(v, field, llm.MaxOutputCap)
}
