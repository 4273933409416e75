package anthropic

import (
	"errors"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// tokensPerMessage wraps each message (role markers). Anthropic's
// tokenizer is not public; the media and tool-prompt figures are in
// package tokenizer, shared with Bedrock.
const tokensPerMessage = 3

// Messages is the /v1/messages API.
type Messages struct{}

var _ llm.API = Messages{}

// Name implements llm.API.
func (Messages) Name() string { return "anthropic.messages" }

// blockFields are the fields read of a content block, of the blocks a
// tool result holds and of a document's source.
var blockFields = func() *llm.Fields {
	f := llm.NewFields().Read("type", "text", "name", "input", "thinking", "data", "title", "context")
	return f.Nest("content", f).Nest("source", llm.NewFields().Read("type", "data").Nest("content", f))
}()

// thinkingFields are the fields of the thinking option; Bedrock passes
// the same object through to Claude.
var thinkingFields = llm.NewFields().Read("type", "budget_tokens")

// messagesFields are the fields Messages reads (see llm.CheckBody).
var messagesFields = llm.NewFields().
	Read("model", "max_tokens", "stream", "tools").
	Nest("system", blockFields).
	Nest("messages", llm.NewFields().Nest("content", blockFields)).
	Nest("thinking", thinkingFields)

// ParseRequest implements llm.API. max_tokens is required by Anthropic;
// a request without it is estimated at the default cap (plus the thinking
// budget, which max_tokens must exceed) so that injecting the cap makes it
// valid.
func (Messages) ParseRequest(_ string, body []byte, opts llm.ParseOptions) (llm.Request, error) {
	var req llm.Request
	if err := llm.CheckBody(body, messagesFields); err != nil {
		return req, err
	}
	var buf [7]gjson.Result
	f := llm.TopFields(gjson.Parse(llm.View(body)), buf[:0], "model", "system", "messages", "tools", "max_tokens", "thinking", "stream")
	model, system, msgs, tools, maxTokens, thinking, stream := f[0], f[1], f[2], f[3], f[4], f[5], f[6]
	var err error
	if req.Model, err = llm.RequiredString(model, "model"); err != nil {
		return req, err
	}
	count := func(s string) int64 { return opts.TokenCounter().CountTokens(req.Model, s) }

	var in int64
	switch sys := system; {
	case sys.Type == gjson.String:
		in += tokensPerMessage + count(sys.Str)
	case sys.IsArray():
		in += tokensPerMessage + blocksTokens(sys, count)
	case sys.Exists() && sys.Type != gjson.Null:
		return req, errors.New("system must be a string or an array of blocks")
	}
	if !msgs.IsArray() {
		return req, errors.New("messages must be an array")
	}
	var bad error
	msgs.ForEach(func(_, m gjson.Result) bool {
		if !m.IsObject() {
			bad = errors.New("each message must be an object")
			return false
		}
		in += tokensPerMessage + contentTokens(m.Get("content"), count)
		return true
	})
	if bad != nil {
		return req, bad
	}
	if tools.IsArray() && len(tools.Raw) > 2 {
		in += tokenizer.ClaudeToolPromptTokens + count(tools.Raw)
	}
	req.InputTokens = in

	capValue, given, err := llm.PositiveInt(maxTokens, "max_tokens", llm.MaxOutputCap)
	if err != nil {
		return req, err
	}
	req.OutputCap, req.CapGiven = capValue, given
	if req.HiddenReasoning, err = Thinking(thinking, "thinking"); err != nil {
		return req, err
	}
	if !given {
		if req.OutputCap, err = DefaultCap(opts.DefaultOutputCap, thinking); err != nil {
			return req, err
		}
	}
	req.Choices = 1
	if req.Stream, err = llm.OptionalBool(stream, "stream"); err != nil {
		return req, err
	}
	// Anthropic always reports usage, streamed or not.
	req.StreamUsage = true
	return req, nil
}

// Thinking reads the thinking option (named field in errors) and reports
// whether it turns extended thinking on: any type but "disabled" does
// ("enabled" with a budget, "adaptive" without one). Claude's thinking is
// billed in full as output, and recent models stream only a summary of
// it. Bedrock passes the same object through to Claude.
func Thinking(thinking gjson.Result, field string) (bool, error) {
	if err := llm.OptionalObject(thinking, field); err != nil {
		return false, err
	}
	typ, err := llm.OptionalString(thinking.Get("type"), field+".type")
	if err != nil {
		return false, err
	}
	return thinking.IsObject() && typ != "disabled", nil
}

// DefaultCap returns the output cap of a request without max_tokens: def,
// plus the budget of extended thinking when thinking (the request's
// "thinking" object) enables it, since max_tokens must exceed the budget
// and the default then covers the answer after the thinking. An unusable
// budget is an error naming thinking.budget_tokens. Bedrock passes the
// same object through to Claude.
func DefaultCap(def int64, thinking gjson.Result) (int64, error) {
	if thinking.Get("type").Str != "enabled" {
		return def, nil
	}
	budget, ok, err := llm.PositiveInt(thinking.Get("budget_tokens"), "thinking.budget_tokens", llm.MaxOutputCap)
	if err != nil || !ok {
		return def, err
	}
	return min(def+budget, llm.MaxOutputCap), nil
}

// contentTokens counts a message's content: a string or an array of blocks.
func contentTokens(v gjson.Result, count func(string) int64) int64 {
	switch {
	case v.Type == gjson.String:
		return count(v.Str)
	case v.IsArray():
		return blocksTokens(v, count)
	case v.Type == gjson.Null || !v.Exists():
		return 0
	}
	return count(v.Raw)
}

// blocksTokens counts an array of content blocks.
func blocksTokens(blocks gjson.Result, count func(string) int64) int64 {
	var n int64
	blocks.ForEach(func(_, b gjson.Result) bool {
		n += blockTokens(b, count)
		return true
	})
	return n
}

// blockTokens counts one content block by its type.
func blockTokens(b gjson.Result, count func(string) int64) int64 {
	switch b.Get("type").Str {
	case "text":
		return count(b.Get("text").Str)
	case "image":
		return tokenizer.ClaudeImageTokens
	case "document":
		return documentTokens(b, count)
	case "tool_use", "server_tool_use":
		return count(b.Get("name").Str) + count(b.Get("input").Raw)
	case "tool_result":
		return contentTokens(b.Get("content"), count)
	case "thinking":
		return count(b.Get("thinking").Str)
	case "redacted_thinking":
		return count(b.Get("data").Str)
	}
	// Blocks not known yet: their JSON is a high, never free, stand-in.
	return count(b.Raw)
}

// documentTokens counts a document block: plain text and custom content
// as text, a base64 PDF by its size (see tokenizer.ClaudePDFBytesPerToken), a PDF by URL
// or file id at one image (it cannot be sized without fetching it).
func documentTokens(b gjson.Result, count func(string) int64) int64 {
	src := b.Get("source")
	var n int64
	if t := b.Get("title"); t.Type == gjson.String {
		n += count(t.Str)
	}
	if c := b.Get("context"); c.Type == gjson.String {
		n += count(c.Str)
	}
	switch src.Get("type").Str {
	case "text":
		return n + count(src.Get("data").Str)
	case "content":
		return n + contentTokens(src.Get("content"), count)
	case "base64":
		decoded := int64(len(src.Get("data").Str)) * 3 / 4
		return n + max(decoded/tokenizer.ClaudePDFBytesPerToken, tokenizer.ClaudeImageTokens)
	}
	return n + tokenizer.ClaudeImageTokens
}

// Inject implements llm.API: it adds max_tokens when absent (Anthropic
// would reject the request without it anyway).
func (Messages) Inject(body []byte, req *llm.Request, opts llm.InjectOptions) ([]byte, error) {
	if !opts.OutputCap || req.CapGiven {
		return nil, nil
	}
	return llm.SetField(body, messagesFields, req.OutputCap, "max_tokens")
}
