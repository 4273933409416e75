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
// valid. With opts.Model set — Claude on Bedrock and on Vertex AI, where
// the path names the model — the body's "model" is neither required nor
// read.
func (Messages) ParseRequest(_ string, body []byte, opts llm.ParseOptions) (llm.Request, error) {
	var req llm.Request
	var buf [7]gjson.Result
	f, err := llm.CheckTop(body, messagesFields, buf[:0], "model", "system", "messages", "tools", "max_tokens", "thinking", "stream")
	if err != nil {
		return req, err
	}
	model, system, msgs, tools, maxTokens, thinking, stream := f[0], f[1], f[2], f[3], f[4], f[5], f[6]
	if req.Model = opts.Model; req.Model == "" {
		if req.Model, err = llm.RequiredString(model, "model"); err != nil {
			return req, err
		}
	}
	c := &counter{counter: opts.TokenCounter(), model: req.Model, text: llm.NewTextCounter(opts.Counter, req.Model)}
	t := llm.NewTally(opts.Explain)
	switch sys := system; {
	case sys.Type == gjson.String:
		t.Overhead(tokensPerMessage)
		t.Add("system text", c.count(sys.Str))
	case sys.IsArray():
		t.Overhead(tokensPerMessage)
		outer := t.Within("system")
		blocksTokens(sys, c, &t)
		t.Leave(outer)
	case sys.Exists() && sys.Type != gjson.Null:
		return req, errors.New("system must be a string or an array of blocks")
	}
	if !msgs.IsArray() {
		return req, errors.New("messages must be an array")
	}
	var bad error
	llm.ForEach(msgs, func(i, m gjson.Result) bool {
		if !m.IsObject() {
			bad = errors.New("each message must be an object")
			return false
		}
		outer := t.Enter("messages", int(i.Num), m)
		t.Overhead(tokensPerMessage)
		contentTokens(m.Get("content"), c, &t)
		t.Leave(outer)
		return true
	})
	if bad != nil {
		return req, bad
	}
	if tools.IsArray() && len(tools.Raw) > 2 {
		t.AddDetail("tools", c.count(tools.Raw), llm.DetailJSON)
		t.AddDetail("tool prompt", tokenizer.ClaudeToolPromptTokens, ToolPromptDetail)
	}
	req.InputTokens = t.Done("message format overhead", "3 a message, an approximation: Anthropic's is not published")

	capValue, given, err := llm.PositiveInt(maxTokens, "max_tokens", llm.MaxOutputCap)
	if err != nil {
		return req, err
	}
	req.OutputCap, req.CapGiven, req.CapSource = capValue, given, "max_tokens"
	if req.HiddenReasoning, err = Thinking(thinking, "thinking"); err != nil {
		return req, err
	}
	if !given {
		if req.OutputCap, req.CapSource, err = DefaultCap(opts.DefaultOutputCap, thinking, llm.DefaultCap+" + thinking.budget_tokens"); err != nil {
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
	typ := thinking.Get("type")
	if typ.Type != gjson.Null && typ.Type != gjson.String {
		// The field's name is put together only for the error: on every
		// request, it would be the parse's one allocation.
		_, err := llm.OptionalString(typ, field+".type")
		return false, err
	}
	return thinking.IsObject() && typ.Str != "disabled", nil
}

// DefaultCap returns the output cap of a request without max_tokens: def,
// plus the budget of extended thinking when thinking (the request's
// "thinking" object) enables it, since max_tokens must exceed the budget
// and the default then covers the answer after the thinking. It returns
// the cap's Request.CapSource too: llm.DefaultCap, or budgeted when the
// budget is added. An unusable budget is an error naming
// thinking.budget_tokens. Bedrock passes the same object through to
// Claude.
func DefaultCap(def int64, thinking gjson.Result, budgeted string) (int64, string, error) {
	if thinking.Get("type").Str != "enabled" {
		return def, llm.DefaultCap, nil
	}
	budget, ok, err := llm.PositiveInt(thinking.Get("budget_tokens"), "thinking.budget_tokens", llm.MaxOutputCap)
	if err != nil || !ok {
		return def, llm.DefaultCap, err
	}
	return min(def+budget, llm.MaxOutputCap), budgeted, nil
}

// ToolPromptDetail explains the tool prompt's part of an estimate.
const ToolPromptDetail = "the system prompt Anthropic adds when tools are offered"

// ImageDetail explains an image's part of an estimate.
const ImageDetail = "the most an image costs on Claude"

// counter counts a request's text for its model.
type counter struct {
	counter llm.Counter
	model   string
	text    llm.TextCounter
}

func (c *counter) count(s string) int64 { return c.text.Count(s) }

// contentTokens counts, into t, a message's content: a string or an
// array of blocks.
func contentTokens(v gjson.Result, c *counter, t *llm.Tally) {
	switch {
	case v.Type == gjson.String:
		t.Add("text", c.count(v.Str))
	case v.IsArray():
		blocksTokens(v, c, t)
	case v.Type == gjson.Null || !v.Exists():
	default:
		t.AddDetail("content", c.count(v.Raw), llm.DetailJSON)
	}
}

// blocksTokens counts an array of content blocks into t.
func blocksTokens(blocks gjson.Result, c *counter, t *llm.Tally) {
	llm.ForEach(blocks, func(_, b gjson.Result) bool {
		blockTokens(b, c, t)
		return true
	})
}

// blockTokens counts one content block, by its type, into t.
func blockTokens(b gjson.Result, c *counter, t *llm.Tally) {
	switch typ := b.Get("type").Str; typ {
	case "text":
		t.Add("text", c.count(b.Get("text").Str))
	case "image":
		t.AddDetail("image", tokenizer.ClaudeImageTokens, ImageDetail)
	case "document":
		outer := t.Within("document")
		documentTokens(b, c, t)
		t.Leave(outer)
	case "tool_use", "server_tool_use":
		outer := t.Within(typ)
		t.Add("name", c.count(b.Get("name").Str))
		t.AddDetail("input", c.count(b.Get("input").Raw), llm.DetailJSON)
		t.Leave(outer)
	case "tool_result":
		outer := t.Within(typ)
		contentTokens(b.Get("content"), c, t)
		t.Leave(outer)
	case "thinking":
		t.Add("thinking", c.count(b.Get("thinking").Str))
	case "redacted_thinking":
		t.Add("redacted_thinking", c.count(b.Get("data").Str))
	default:
		// Blocks not known yet: their JSON is a high, never free,
		// stand-in.
		t.AddJSON(typ, c.count(b.Raw))
	}
}

// documentTokens counts a document block into t: plain text and custom
// content as text, a base64 PDF by its size (see
// tokenizer.ClaudePDFBytesPerToken), a PDF by URL or file id at one
// image (it cannot be sized without fetching it).
func documentTokens(b gjson.Result, c *counter, t *llm.Tally) {
	src := b.Get("source")
	if title := b.Get("title"); title.Type == gjson.String {
		t.Add("title", c.count(title.Str))
	}
	if ctx := b.Get("context"); ctx.Type == gjson.String {
		t.Add("context", c.count(ctx.Str))
	}
	switch src.Get("type").Str {
	case "text":
		t.Add("text", c.count(src.Get("data").Str))
	case "content":
		contentTokens(src.Get("content"), c, t)
	case "base64":
		PDFTokens(t, "PDF", int64(len(src.Get("data").Str))*3/4)
	default:
		t.AddDetail("source", tokenizer.ClaudeImageTokens, "a URL or file id: its size is unknown, charged as one image")
	}
}

// PDFTokens counts into t, as what, a base64 PDF of decoded bytes by its
// size, at least one image's worth. Bedrock's documents are charged so
// too, whatever their format.
func PDFTokens(t *llm.Tally, what string, decoded int64) {
	t.AddDetail(what, max(decoded/tokenizer.ClaudePDFBytesPerToken, tokenizer.ClaudeImageTokens),
		"%d bytes, a token per %d bytes, at least one image", decoded, tokenizer.ClaudePDFBytesPerToken)
}

// Inject implements llm.API: it adds max_tokens when absent (Anthropic
// would reject the request without it anyway).
func (Messages) Inject(body []byte, req *llm.Request, opts llm.InjectOptions) ([]byte, error) {
	if !opts.OutputCap || req.CapGiven {
		return nil, nil
	}
	return llm.SetFieldIn(opts.Buf, body, messagesFields, req.OutputCap, "max_tokens")
}
