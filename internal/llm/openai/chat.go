package openai

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
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
	text    llm.TextCounter
}

func (c *textCounter) count(s string) int64 { return c.text.Count(s) }

// image counts, into t, an image priced by the model's formula (OpenAI's
// 512-px tiles from detail and size). A data URL tells its size from its
// header; a plain URL cannot be sized without fetching it and is charged
// as the configured default size, or the most it can cost.
func (c *textCounter) image(t *llm.Tally, what, detail, url string) {
	w, h, _ := tokenizer.DataURLImageSize(url)
	t.AddImage(what, c.counter.ImageTokens(c.model, detail, w, h), detail, w, h)
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
//
// The server's parse, which does not explain itself, counts the messages
// in the pass that checks the body (see scanChat), and reads a body of
// the usual shape in a quicker pass of its own first (exactChat); a parse
// that explains walks them once the body is checked (walkChat), naming
// each part. FuzzChatScan holds the three to one estimate and one
// verdict.
func (Chat) ParseRequest(_ string, body []byte, opts llm.ParseOptions) (llm.Request, error) {
	if opts.Explain != nil {
		return walkChat(body, opts)
	}
	if req, ok, err := exactChat(body, opts); ok {
		return req, err
	}
	return scanChat(body, opts)
}

// chatNames are the top-level fields Chat reads: the model, the stream
// flag, then chatTop.
var chatNames = [...]string{"model", "stream", "messages", "tools", "functions",
	"max_completion_tokens", "max_tokens", "n", "stream_options", "reasoning_effort", "service_tier"}

// chatTop are the top-level fields Chat reads after the model and the
// stream flag.
var chatTop = chatNames[2:]

// walkChat parses a chat request by checking the body, then walking its
// messages.
func walkChat(body []byte, opts llm.ParseOptions) (llm.Request, error) {
	var out [maxFields]gjson.Result
	f, req, err := parseBody(body, chatFields, opts, &out, chatTop...)
	if err != nil {
		return req, err
	}
	msgs := f[0]
	if req.ServiceTier, err = llm.OptionalString(f[8], "service_tier"); err != nil {
		return req, err
	}
	if !msgs.IsArray() {
		return req, errors.New("messages must be an array")
	}
	tc := &textCounter{counter: opts.TokenCounter(), model: req.Model, text: llm.NewTextCounter(opts.Counter, req.Model)}
	count := tc.count

	t := llm.NewTally(opts.Explain)
	var bad error
	llm.ForEach(msgs, func(i, m gjson.Result) bool {
		if !m.IsObject() {
			bad = errNotObjectMessage
			return false
		}
		outer := t.Enter("messages", int(i.Num), m)
		t.Overhead(tokensPerMessage)
		llm.ForEach(m, func(k, v gjson.Result) bool {
			switch k.Str {
			case "content":
				contentTokens(v, tc, &t)
			case "name":
				t.Overhead(tokensPerName)
				t.Add("name", count(v.Str))
			case "role":
				t.Overhead(1)
			case "tool_calls", "function_call", "refusal", "audio":
				t.AddJSON(k.Str, count(v.Raw))
			}
			return true
		})
		t.Leave(outer)
		return true
	})
	if bad != nil {
		return req, bad
	}
	req.Shape = llm.ShapeOf(body, chatFields)
	return finishChat(req, f, tc, &t, opts)
}

// errNotObjectMessage refuses a message that is not an object.
var errNotObjectMessage = errors.New("each message must be an object")

// finishChat reads what follows the messages: the tools, which it counts,
// the output caps and the options.
func finishChat(req llm.Request, f []gjson.Result, tc *textCounter, t *llm.Tally, opts llm.ParseOptions) (llm.Request, error) {
	tools, fns := f[1], f[2]
	maxCompletion, maxTokens, n, streamOpts, effort := f[3], f[4], f[5], f[6], f[7]
	count := tc.count
	t.Overhead(replyPriming)
	// Tool schemas are rendered into the prompt; their JSON is a fair,
	// slightly high, stand-in for OpenAI's hidden formatting.
	if tools.IsArray() {
		t.AddDetail("tools", count(tools.Raw), llm.DetailJSON)
	}
	if fns.IsArray() {
		t.AddDetail("functions", count(fns.Raw), llm.DetailJSON)
	}
	req.InputTokens = t.Done("chat format overhead", "3 a message, 1 a role, 1 a name, 3 to prime the reply")

	completionCap, completionGiven, err := outputCap(maxCompletion, "max_completion_tokens")
	if err != nil {
		return req, err
	}
	tokensCap, tokensGiven, err := outputCap(maxTokens, "max_tokens")
	if err != nil {
		return req, err
	}
	req.OutputCap, req.CapGiven = max(completionCap, tokensCap), completionGiven || tokensGiven
	switch {
	case !req.CapGiven:
		req.OutputCap, req.CapSource = opts.DefaultOutputCap, llm.DefaultCap
	case completionCap >= tokensCap:
		req.CapSource = "max_completion_tokens"
	default:
		req.CapSource = "max_tokens"
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

// contentTokens counts, into t, a message's content: a string, or an
// array of parts.
func contentTokens(v gjson.Result, tc *textCounter, t *llm.Tally) {
	count := tc.count
	switch {
	case v.Type == gjson.String:
		t.Add("text", count(v.Str))
	case v.IsArray():
		llm.ForEach(v, func(_, part gjson.Result) bool {
			switch typ := part.Get("type").Str; typ {
			case "text":
				t.Add("text", count(part.Get("text").Str))
			case "image_url":
				tc.image(t, "image_url", part.Get("image_url.detail").Str, part.Get("image_url.url").Str)
			default:
				// Audio, files and parts not known yet: charge their JSON
				// as text. High rather than zero; never free.
				t.AddJSON(typ, count(part.Raw))
			}
			return true
		})
	case v.Type == gjson.Null:
	default:
		t.AddDetail("content", count(v.Raw), llm.DetailJSON)
	}
}

// Inject implements llm.API.
func (Chat) Inject(body []byte, req *llm.Request, opts llm.InjectOptions) ([]byte, error) {
	var out []byte
	var err error
	// The parse's Shape spares each edit a search of the body for a
	// field it lacks; the first edit's Shape describes the edited body.
	sh := req.Shape
	if opts.OutputCap && !req.CapGiven {
		if out, err = sh.SetField(opts.Buf, body, chatFields, req.OutputCap, CapField(req.Model)); err != nil {
			return nil, err
		}
	}
	return injectStreamUsage(body, out, chatFields, &sh, req, opts)
}

// CapField returns the output-cap field a model accepts: reasoning models
// (o-series, gpt-5) reject the deprecated max_tokens with a 400, while many
// OpenAI-compatible servers know only max_tokens.
func CapField(model string) string {
	// The family: without a provider prefix, and a fine-tune
	// (ft:o4-mini-2025-04-16:org::id) as its base.
	m := accounting.ModelFamily(model)
	if len(m) >= 2 && m[0] == 'o' && m[1] >= '1' && m[1] <= '9' || strings.HasPrefix(m, "gpt-5") {
		return "max_completion_tokens"
	}
	return "max_tokens"
}
