package bedrock

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/anthropic"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// tokensPerMessage is the per-message overhead. Bedrock serves many model
// families; images, documents and the tool prompt are charged at Claude's
// rates (package anthropic), the high side of the ones it documents.
const tokensPerMessage = 3

// Converse is the Converse and ConverseStream API.
type Converse struct{}

var _ llm.API = Converse{}

// Name implements llm.API.
func (Converse) Name() string { return "bedrock.converse" }

// blockFields are the fields read of a ContentBlock (or a
// SystemContentBlock), a union whose one member names its kind, and of
// the blocks inside it.
var blockFields = func() *llm.Fields {
	f := llm.NewFields().Read("text", "image", "video", "json", "cachePoint")
	return f.Nest("document", llm.NewFields().Nest("source", llm.NewFields().Read("text", "bytes").Nest("content", f))).
		Nest("toolUse", llm.NewFields().Read("name", "input")).
		Nest("toolResult", llm.NewFields().Nest("content", f)).
		Nest("reasoningContent", llm.NewFields().Nest("reasoningText", llm.NewFields().Read("text"))).
		Nest("guardContent", llm.NewFields().Nest("text", llm.NewFields().Read("text")))
}()

// converseFields are the fields Converse reads (see llm.CheckBody).
var converseFields = llm.NewFields().
	Read("promptVariables").
	Nest("messages", llm.NewFields().Nest("content", blockFields)).
	Nest("system", blockFields).
	Nest("toolConfig", llm.NewFields().Read("tools")).
	Nest("inferenceConfig", llm.NewFields().Read("maxTokens")).
	Nest("additionalModelRequestFields", llm.NewFields().
		Read("max_tokens").
		Nest("thinking", llm.NewFields().Read("type", "budget_tokens")).
		Nest("reasoningConfig", llm.NewFields().Read("type")))

// ParseRequest implements llm.API. The model and streaming come from the
// path. Reasoning is turned on (HiddenReasoning) by Claude's thinking
// option or by a reasoningConfig (Amazon Nova) whose type is not
// "disabled", both passed in additionalModelRequestFields.
func (Converse) ParseRequest(path string, body []byte, opts llm.ParseOptions) (llm.Request, error) {
	var buf [6]gjson.Result
	req, f, err := llm.NewPathRequest(path, body, converseFields, ModelFromPath, buf[:0], "messages", "system", "toolConfig", "promptVariables",
		"inferenceConfig", "additionalModelRequestFields")
	if err != nil {
		return req, err
	}
	msgs, system, toolConfig, promptVars, inference, additional := f[0], f[1], f[2], f[3], f[4], f[5]
	c := &counter{counter: opts.TokenCounter(), model: req.Model, text: llm.NewTextCounter(opts.Counter, req.Model)}

	t := llm.NewTally(opts.Explain)
	if msgs.Exists() && !msgs.IsArray() {
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
		blocksTokens(m.Get("content"), c, &t)
		t.Leave(outer)
		return true
	})
	if bad != nil {
		return req, bad
	}
	if system.IsArray() {
		outer := t.Within("system")
		t.Overhead(tokensPerMessage)
		blocksTokens(system, c, &t)
		t.Leave(outer)
	}
	if tools := toolConfig.Get("tools"); tools.IsArray() && len(tools.Raw) > 2 {
		t.AddDetail("toolConfig.tools", c.count(tools.Raw), llm.DetailJSON)
		if strings.Contains(req.Model, "anthropic") {
			t.AddDetail("tool prompt", tokenizer.ClaudeToolPromptTokens, anthropic.ToolPromptDetail)
		}
	}
	req.InputTokens = t.Done("message format overhead", "3 a message")
	if promptVars.IsObject() {
		req.Notes = "promptVariables: the managed prompt's own text is billed as input but not counted"
	}

	if err := llm.OptionalObject(inference, "inferenceConfig"); err != nil {
		return req, err
	}
	req.OutputCap, req.CapGiven, err = llm.PositiveInt(inference.Get("maxTokens"), "inferenceConfig.maxTokens", llm.MaxOutputCap)
	if err != nil {
		return req, err
	}
	req.CapSource = "inferenceConfig.maxTokens"
	if err := llm.OptionalObject(additional, "additionalModelRequestFields"); err != nil {
		return req, err
	}
	// Claude's own max_tokens, passed through: the model generates up to
	// it when inferenceConfig sets no cap, so it bounds the reservation
	// too (the larger of both, should a request carry the two).
	native, nativeGiven, err := llm.PositiveInt(additional.Get("max_tokens"), "additionalModelRequestFields.max_tokens", llm.MaxOutputCap)
	if err != nil {
		return req, err
	}
	if nativeGiven && native > req.OutputCap {
		req.OutputCap, req.CapGiven, req.CapSource = native, true, "additionalModelRequestFields.max_tokens"
	}
	thinking := additional.Get("thinking")
	if req.HiddenReasoning, err = anthropic.Thinking(thinking, "additionalModelRequestFields.thinking"); err != nil {
		return req, err
	}
	reasoning := additional.Get("reasoningConfig")
	if err := llm.OptionalObject(reasoning, "additionalModelRequestFields.reasoningConfig"); err != nil {
		return req, err
	}
	typ, err := llm.OptionalString(reasoning.Get("type"), "additionalModelRequestFields.reasoningConfig.type")
	if err != nil {
		return req, err
	}
	nova := reasoning.IsObject() && typ != "disabled"
	req.HiddenReasoning = req.HiddenReasoning || nova
	// Claude's thinking is part of its max_tokens; how Nova's reasoning
	// counts against maxTokens is not documented.
	req.OutputBeyondCap = nova
	if !req.CapGiven {
		// Claude's extended thinking, passed through in Anthropic's own
		// shape: maxTokens must exceed the budget.
		if req.OutputCap, req.CapSource, err = anthropic.DefaultCap(opts.DefaultOutputCap, thinking,
			llm.DefaultCap+" + additionalModelRequestFields.thinking.budget_tokens"); err != nil {
			return req, err
		}
	}
	return req, nil
}

// counter counts a request's text for its model.
type counter struct {
	counter llm.Counter
	model   string
	text    llm.TextCounter
}

func (c *counter) count(s string) int64 { return c.text.Count(s) }

// blocksTokens counts an array of ContentBlocks (or SystemContentBlocks)
// into t. Each block is a union: an object with one member naming its
// kind.
func blocksTokens(blocks gjson.Result, c *counter, t *llm.Tally) {
	llm.ForEach(blocks, func(_, b gjson.Result) bool {
		llm.ForEach(b, func(k, v gjson.Result) bool {
			blockTokens(k.Str, v, c, t)
			return true
		})
		return true
	})
}

// blockTokens counts one block member, of kind, into t.
func blockTokens(kind string, v gjson.Result, c *counter, t *llm.Tally) {
	switch kind {
	case "text":
		t.Add("text", c.count(v.Str))
	case "image", "video":
		t.AddDetail(kind, tokenizer.ClaudeImageTokens, anthropic.ImageDetail+", charged for every Bedrock model")
	case "document":
		outer := t.Within("document")
		src := v.Get("source")
		if text := src.Get("text"); text.Type == gjson.String {
			t.Add("text", c.count(text.Str))
		} else if content := src.Get("content"); content.IsArray() {
			blocksTokens(content, c, t)
		} else {
			anthropic.PDFTokens(t, "bytes", int64(len(src.Get("bytes").Str))*3/4)
		}
		t.Leave(outer)
	case "toolUse":
		outer := t.Within(kind)
		t.Add("name", c.count(v.Get("name").Str))
		t.AddDetail("input", c.count(v.Get("input").Raw), llm.DetailJSON)
		t.Leave(outer)
	case "toolResult":
		outer := t.Within(kind)
		blocksTokens(v.Get("content"), c, t)
		t.Leave(outer)
	case "json":
		t.AddDetail(kind, c.count(v.Raw), llm.DetailJSON)
	case "reasoningContent":
		t.Add(kind, c.count(v.Get("reasoningText.text").Str))
	case "guardContent":
		t.Add(kind, c.count(v.Get("text.text").Str))
	case "cachePoint":
	default:
		// Blocks not known yet: their JSON, high but never free.
		t.AddJSON(kind, c.count(v.Raw))
	}
}

// Inject implements llm.API: it sets inferenceConfig.maxTokens when
// absent.
func (Converse) Inject(body []byte, req *llm.Request, opts llm.InjectOptions) ([]byte, error) {
	if !opts.OutputCap || req.CapGiven {
		return nil, nil
	}
	return llm.SetFieldIn(opts.Buf, body, converseFields, req.OutputCap, "inferenceConfig", "maxTokens")
}
