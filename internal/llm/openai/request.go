package openai

import (
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// maxFields is how many top-level fields an endpoint reads.
const maxFields = 12

// parseBody checks a request body against fields (llm.CheckBody) and
// reads, in one pass, the fields every OpenAI endpoint has (the model and
// the stream flag) and the named ones, which it returns in order, in out. A model
// in opts (an Azure deployment's) is the request's, and the body's is
// then not read: Azure ignores it.
func parseBody(body []byte, fields *llm.Fields, opts llm.ParseOptions, out *[maxFields]gjson.Result, names ...string) (f []gjson.Result, req llm.Request, err error) {
	var all [maxFields]string
	if f, err = llm.CheckTop(body, fields, out[:0], append(append(all[:0], "model", "stream"), names...)...); err != nil {
		return nil, req, err
	}
	if req, err = topRequest(f[0], f[1], opts); err != nil {
		return nil, req, err
	}
	return f[2:], req, nil
}

// topRequest reads the fields every OpenAI endpoint has, the model (unless
// opts name it) and the stream flag, into a new Request.
func topRequest(model, stream gjson.Result, opts llm.ParseOptions) (req llm.Request, err error) {
	req.Model = opts.Model
	if req.Model == "" {
		if req.Model, err = llm.RequiredString(model, "model"); err != nil {
			return req, err
		}
	}
	if req.Stream, err = llm.OptionalBool(stream, "stream"); err != nil {
		return req, err
	}
	req.Choices = 1
	return req, nil
}

// streamUsage reads stream_options: whether it asks for usage. It must be
// an object or null, so that an injected include_usage has a place.
func streamUsage(v gjson.Result) (bool, error) {
	if err := llm.OptionalObject(v, "stream_options"); err != nil {
		return false, err
	}
	return llm.OptionalBool(v.Get("include_usage"), "stream_options.include_usage")
}

// injectStreamUsage sets stream_options.include_usage in body (or in
// edited, when an earlier edit made it) when opts ask for it and the
// streaming request does not. sh is the Shape of the body edited, or the
// zero Shape.
func injectStreamUsage(body, edited []byte, fields *llm.Fields, sh *llm.Shape, req *llm.Request, opts llm.InjectOptions) ([]byte, error) {
	if !opts.StreamUsage || !req.Stream || req.StreamUsage {
		return edited, nil
	}
	if edited != nil {
		body = edited
	}
	return sh.SetField(opts.Buf, body, fields, true, "stream_options", "include_usage")
}

// promptTokens counts, into t, a prompt that may be a string, an array of
// strings, an array of token ids or an array of such arrays (completions
// and embeddings take all four). Token ids count one each, exactly. It
// returns how many separate prompts the value holds: each gets its own
// completions.
func promptTokens(v gjson.Result, field string, t *llm.Tally, count func(string) int64) (prompts int64, err error) {
	switch {
	case v.Type == gjson.String:
		t.Add(field, count(v.Str))
		return 1, nil
	case v.IsArray():
	default:
		return 0, fmt.Errorf("%s must be a string or an array", field)
	}
	var ints int64
	llm.ForEach(v, func(i, item gjson.Result) bool {
		switch {
		case item.Type == gjson.String:
			outer := t.Enter(field, int(i.Num), item)
			t.Add("", count(item.Str))
			t.Leave(outer)
			prompts++
		case item.Type == gjson.Number:
			ints++
		case item.IsArray():
			var ids int64
			llm.ForEach(item, func(_, id gjson.Result) bool {
				if id.Type != gjson.Number {
					err = fmt.Errorf("%s token arrays must hold integers", field)
					return false
				}
				ids++
				return true
			})
			outer := t.Enter(field, int(i.Num), item)
			t.AddDetail("", ids, "token ids")
			t.Leave(outer)
			prompts++
		default:
			err = fmt.Errorf("%s items must be strings, integers or integer arrays", field)
		}
		return err == nil
	})
	if ints > 0 {
		// A flat array of token ids is one prompt.
		t.AddDetail(field, ints, "token ids")
		prompts++
	}
	return max(prompts, 1), err
}

// outputCap reads an optional output-cap field.
func outputCap(v gjson.Result, field string) (int64, bool, error) {
	return llm.PositiveInt(v, field, llm.MaxOutputCap)
}
