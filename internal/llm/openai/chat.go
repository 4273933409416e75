package openai

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// Token overheads of the chat format: every message is wrapped in a few
// formatting tokens, a name costs one more, and the reply is primed with a
// few more (OpenAI's published rule of thumb).
const (
	tokensPerMessage = 3
	tokensPerName    = 1
	replyPriming     = 3
	// maxChoices is OpenAI's bound on n.
	maxChoices = 128
)

// textCounter counts a request's text and images for its model.
type textCounter struct {
	counter llm.Counter
	model   string
}

func (c *textCounter) count(s string) int64 { return c.counter.CountTokens(c.model, s) }

// image prices an image by the model's formula (OpenAI's 512-px tiles
// from detail and size). A data URL tells its size from its header; a
// plain URL cannot be sized without fetching it and is charged as the
// configured default size, or the most it can cost.
func (c *textCounter) image(detail, url string) int64 {
	w, h, _ := tokenizer.DataURLImageSize(url)
	return c.counter.ImageTokens(c.model, detail, w, h)
}

// Chat is the /v1/chat/completions API.
type Chat struct{}

var _ llm.API = Chat{}

// Name implements llm.API.
func (Chat) Name() string { return "openai.chat" }

// ParseRequest implements llm.API. The output cap is the larger of
// max_completion_tokens and max_tokens when both are given: OpenAI reads
// the first, servers that know only max_tokens read the second, and the
// reservation must cover whichever the upstream reads.
func (Chat) ParseRequest(_ string, body []byte, opts llm.ParseOptions) (llm.Request, error) {
	var out [maxFields]gjson.Result
	f, req, err := parseBody(body, chatFields, opts, &out, "messages", "tools", "functions",
		"max_completion_tokens", "max_tokens", "n", "stream_options", "reasoning_effort")
	if err != nil {
		return req, err
	}
	msgs, tools, fns := f[0], f[1], f[2]
	maxCompletion, maxTokens, n, streamOpts, effort := f[3], f[4], f[5], f[6], f[7]
	if !msgs.IsArray() {
		return req, errors.New("messages must be an array")
	}
	tc := &textCounter{counter: opts.TokenCounter(), model: req.Model}
	count := tc.count

	var in int64
	var bad error
	msgs.ForEach(func(_, m gjson.Result) bool {
		if !m.IsObject() {
			bad = errors.New("each message must be an object")
			return false
		}
		in += tokensPerMessage
		m.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "content":
				in += contentTokens(v, tc)
			case "name":
				in += tokensPerName + count(v.Str)
			case "role":
				in += 1
			case "tool_calls", "function_call", "refusal", "audio":
				in += count(v.Raw)
			}
			return true
		})
		return true
	})
	if bad != nil {
		return req, bad
	}
	in += replyPriming
	// Tool schemas are rendered into the prompt; their JSON is a fair,
	// slightly high, stand-in for OpenAI's hidden formatting.
	if tools.IsArray() {
		in += count(tools.Raw)
	}
	if fns.IsArray() {
		in += count(fns.Raw)
	}
	req.InputTokens = in

	completionCap, completionGiven, err := outputCap(maxCompletion, "max_completion_tokens")
	if err != nil {
		return req, err
	}
	tokensCap, tokensGiven, err := outputCap(maxTokens, "max_tokens")
	if err != nil {
		return req, err
	}
	req.OutputCap, req.CapGiven = max(completionCap, tokensCap), completionGiven || tokensGiven
	if !req.CapGiven {
		req.OutputCap = opts.DefaultOutputCap
	}
	choices, given, err := llm.PositiveInt(n, "n", maxChoices)
	if err != nil {
		return req, err
	}
	if given {
		req.Choices = choices
	}
	if req.StreamUsage, err = streamUsage(streamOpts); err != nil {
		return req, err
	}
	// reasoning_effort turns reasoning on (or, as "none", off) for the
	// models that have it.
	e, err := llm.OptionalString(effort, "reasoning_effort")
	if err != nil {
		return req, err
	}
	req.HiddenReasoning = e != "" && e != "none"
	return req, nil
}

// contentTokens counts a message's content: a string, or an array of parts.
func contentTokens(v gjson.Result, tc *textCounter) int64 {
	count := tc.count
	switch {
	case v.Type == gjson.String:
		return count(v.Str)
	case v.IsArray():
		var n int64
		v.ForEach(func(_, part gjson.Result) bool {
			switch part.Get("type").Str {
			case "text":
				n += count(part.Get("text").Str)
			case "image_url":
				n += tc.image(part.Get("image_url.detail").Str, part.Get("image_url.url").Str)
			default:
				// Audio, files and parts not known yet: charge their JSON
				// as text. High rather than zero; never free.
				n += count(part.Raw)
			}
			return true
		})
		return n
	case v.Type == gjson.Null:
		return 0
	}
	return count(v.Raw)
}

// Inject implements llm.API.
func (Chat) Inject(body []byte, req *llm.Request, opts llm.InjectOptions) ([]byte, error) {
	var out []byte
	var err error
	if opts.OutputCap && !req.CapGiven {
		if out, err = llm.SetField(body, chatFields, req.OutputCap, CapField(req.Model)); err != nil {
			return nil, err
		}
	}
	return injectStreamUsage(body, out, chatFields, req, opts)
}

// CapField returns the output-cap field a model accepts: reasoning models
// (o-series, gpt-5) reject the deprecated max_tokens with a 400, while many
// OpenAI-compatible servers know only max_tokens.
func CapField(model string) string {
	m := model
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if len(m) >= 2 && m[0] == 'o' && m[1] >= '1' && m[1] <= '9' || strings.HasPrefix(m, "gpt-5") {
		return "max_completion_tokens"
	}
	return "max_tokens"
}
