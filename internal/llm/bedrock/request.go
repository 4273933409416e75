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
	req, err := llm.NewPathRequest(path, body, converseFields, ModelFromPath)
	if err != nil {
		return req, err
	}
	var buf [6]gjson.Result
	f := llm.TopFields(gjson.Parse(llm.View(body)), buf[:0], "messages", "system", "toolConfig", "promptVariables",
		"inferenceConfig", "additionalModelRequestFields")
	msgs, system, toolConfig, promptVars, inference, additional := f[0], f[1], f[2], f[3], f[4], f[5]
	count := func(s string) int64 { return opts.TokenCounter().CountTokens(req.Model, s) }

	var in int64
	if msgs.Exists() && !msgs.IsArray() {
		return req, errors.New("messages must be an array")
	}
	var bad error
	msgs.ForEach(func(_, m gjson.Result) bool {
		if !m.IsObject() {
			bad = errors.New("each message must be an object")
			return false
		}
		in += tokensPerMessage + blocksTokens(m.Get("content"), count)
		return true
	})
	if bad != nil {
		return req, bad
	}
	if system.IsArray() {
		in += tokensPerMessage + blocksTokens(system, count)
	}
	if tools := toolConfig.Get("tools"); tools.IsArray() && len(tools.Raw) > 2 {
		in += count(tools.Raw)
		if strings.Contains(req.Model, "anthropic") {
			in += tokenizer.ClaudeToolPromptTokens
		}
	}
	req.InputTokens = in
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
	if nativeGiven {
		req.OutputCap, req.CapGiven = max(req.OutputCap, native), true
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
	req.HiddenReasoning = req.HiddenReasoning || reasoning.IsObject() && typ != "disabled"
	if !req.CapGiven {
		// Claude's extended thinking, passed through in Anthropic's own
		// shape: maxTokens must exceed the budget.
		if req.OutputCap, err = anthropic.DefaultCap(opts.DefaultOutputCap, thinking); err != nil {
			return req, err
		}
	}
	return req, nil
}

// blocksTokens counts an array of ContentBlocks (or SystemContentBlocks).
// Each block is a union: an object with one member naming its kind.
func blocksTokens(blocks gjson.Result, count func(string) int64) int64 {
	var n int64
	blocks.ForEach(func(_, b gjson.Result) bool {
		b.ForEach(func(k, v gjson.Result) bool {
			n += blockTokens(k.Str, v, count)
			return true
		})
		return true
	})
	return n
}

func blockTokens(kind string, v gjson.Result, count func(string) int64) int64 {
	switch kind {
	case "text":
		return count(v.Str)
	case "image", "video":
		return tokenizer.ClaudeImageTokens
	case "document":
		src := v.Get("source")
		if t := src.Get("text"); t.Type == gjson.String {
			return count(t.Str)
		}
		if c := src.Get("content"); c.IsArray() {
			return blocksTokens(c, count)
		}
		decoded := int64(len(src.Get("bytes").Str)) * 3 / 4
		return max(decoded/tokenizer.ClaudePDFBytesPerToken, tokenizer.ClaudeImageTokens)
	case "toolUse":
		return count(v.Get("name").Str) + count(v.Get("input").Raw)
	case "toolResult":
		return blocksTokens(v.Get("content"), count)
	case "json":
		return count(v.Raw)
	case "reasoningContent":
		return count(v.Get("reasoningText.text").Str)
	case "guardContent":
		return count(v.Get("text.text").Str)
	case "cachePoint":
		return 0
	}
	// Blocks not known yet: their JSON, high but never free.
	return count(v.Raw)
}

// Inject implements llm.API: it sets inferenceConfig.maxTokens when
// absent.
func (Converse) Inject(body []byte, req *llm.Request, opts llm.InjectOptions) ([]byte, error) {
	if !opts.OutputCap || req.CapGiven {
		return nil, nil
	}
	return llm.SetField(body, converseFields, req.OutputCap, "inferenceConfig", "maxTokens")
}
