package openai

import (
	"errors"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// responsesMinCap is the smallest max_output_tokens the Responses API
// accepts: an injected default below it would turn into a 400.
const responsesMinCap = 16

// Responses is the /v1/responses API. Its usage arrives in the JSON body's
// "usage", or in the stream's terminal event (response.completed,
// response.incomplete or response.failed); the stream always reports it,
// so there is no usage option to inject.
type Responses struct{}

var _ llm.API = Responses{}

// Name implements llm.API.
func (Responses) Name() string { return "openai.responses" }

// ParseRequest implements llm.API. State kept by OpenAI
// (previous_response_id, conversation, stored prompts, item references) is
// billed as input but is not in the body: the estimate says so in Notes.
// "background": true runs the response on after the reply (Background),
// and a reasoning object turns reasoning on (HiddenReasoning) unless its
// effort is "none".
func (Responses) ParseRequest(_ string, body []byte, opts llm.ParseOptions) (llm.Request, error) {
	var out [maxFields]gjson.Result
	f, req, err := parseBody(body, responsesFields, opts, &out, "input", "instructions", "tools", "text",
		"previous_response_id", "conversation", "prompt", "max_output_tokens", "background", "reasoning", "service_tier")
	if err != nil {
		return req, err
	}
	if req.ServiceTier, err = llm.OptionalString(f[10], "service_tier"); err != nil {
		return req, err
	}
	input, instructions, tools, text := f[0], f[1], f[2], f[3]
	prevID, conversation, prompt, maxOutput := f[4], f[5], f[6], f[7]
	background, reasoning := f[8], f[9]
	if req.Background, err = llm.OptionalBool(background, "background"); err != nil {
		return req, err
	}
	if err := llm.OptionalObject(reasoning, "reasoning"); err != nil {
		return req, err
	}
	effort, err := llm.OptionalString(reasoning.Get("effort"), "reasoning.effort")
	if err != nil {
		return req, err
	}
	req.HiddenReasoning = reasoning.IsObject() && effort != "none"
	tc := &textCounter{counter: opts.TokenCounter(), model: req.Model, text: llm.NewTextCounter(opts.Counter, req.Model)}
	count := tc.count
	var notes []string
	t := llm.NewTally(opts.Explain)
	switch {
	case input.Type == gjson.String:
		t.Overhead(tokensPerMessage)
		t.Add("input", count(input.Str))
	case input.IsArray():
		var bad error
		llm.ForEach(input, func(i, item gjson.Result) bool {
			if !item.IsObject() {
				bad = errors.New("input items must be objects")
				return false
			}
			outer := t.Enter("input", int(i.Num), item)
			if responsesItemTokens(item, tc, &t) {
				notes = llm.AppendNote(notes, "input item_reference items are billed but not counted")
			}
			t.Leave(outer)
			return true
		})
		if bad != nil {
			return req, bad
		}
	case input.Exists() && input.Type != gjson.Null:
		return req, errors.New("input must be a string or an array")
	}
	if instructions.Type == gjson.String {
		t.Overhead(tokensPerMessage)
		t.Add("instructions", count(instructions.Str))
	}
	if tools.IsArray() {
		t.AddDetail("tools", count(tools.Raw), llm.DetailJSON)
	}
	// A structured-output schema is rendered into the prompt too.
	if format := text.Get("format"); format.IsObject() {
		t.AddDetail("text.format", count(format.Raw), llm.DetailJSON)
	}
	t.Overhead(replyPriming)
	req.InputTokens = t.Done("responses format overhead", "3 an item, 1 a role, 3 to prime the reply")

	if prevID.Type == gjson.String && prevID.Str != "" {
		notes = llm.AppendNote(notes, "previous_response_id: the earlier conversation is billed as input but not counted")
	}
	if conversation.Exists() && conversation.Type != gjson.Null {
		notes = llm.AppendNote(notes, "conversation: its stored items are billed as input but not counted")
	}
	if prompt.IsObject() {
		notes = llm.AppendNote(notes, "prompt: the stored prompt template is billed as input but not counted")
	}
	req.Notes = strings.Join(notes, "; ")

	req.OutputCap, req.CapGiven, err = outputCap(maxOutput, "max_output_tokens")
	if err != nil {
		return req, err
	}
	req.CapSource = "max_output_tokens"
	if !req.CapGiven {
		req.OutputCap, req.CapSource = max(opts.DefaultOutputCap, responsesMinCap), llm.DefaultCap
		if opts.DefaultOutputCap < responsesMinCap {
			req.CapSource = "the Responses API's least max_output_tokens"
		}
	}
	req.StreamUsage = true
	return req, nil
}

// responsesItemTokens counts one input item into t, and reports an
// item_reference, whose content lives on OpenAI's side.
func responsesItemTokens(item gjson.Result, tc *textCounter, t *llm.Tally) (ref bool) {
	count := tc.count
	t.Overhead(tokensPerMessage)
	switch typ := item.Get("type").Str; typ {
	case "", "message":
		t.Overhead(1) // the role
		responsesContentTokens(item.Get("content"), tc, t)
	case "function_call":
		t.Add("name", count(item.Get("name").Str))
		t.Add("arguments", count(item.Get("arguments").Str))
	case "function_call_output", "custom_tool_call_output":
		responsesContentTokens(item.Get("output"), tc, t)
	case "item_reference":
		return true
	default:
		// Reasoning, tool calls and items not known yet: their JSON is a
		// high but never free stand-in.
		t.AddJSON(typ, count(item.Raw))
	}
	return false
}

// responsesContentTokens counts message content, a string or parts,
// into t.
func responsesContentTokens(v gjson.Result, tc *textCounter, t *llm.Tally) {
	count := tc.count
	if v.Type == gjson.String {
		t.Add("text", count(v.Str))
		return
	}
	if !v.IsArray() {
		if v.Type != gjson.Null && v.Exists() {
			t.AddDetail("content", count(v.Raw), llm.DetailJSON)
		}
		return
	}
	llm.ForEach(v, func(_, part gjson.Result) bool {
		switch typ := part.Get("type").Str; typ {
		case "input_text", "output_text", "text":
			t.Add(typ, count(part.Get("text").Str))
		case "refusal":
			t.Add(typ, count(part.Get("refusal").Str))
		case "input_image":
			tc.image(t, typ, part.Get("detail").Str, part.Get("image_url").Str)
		default:
			// Files (inline data is charged as text: high, never free)
			// and parts not known yet.
			t.AddJSON(typ, count(part.Raw))
		}
		return true
	})
}

// Inject implements llm.API: it adds max_output_tokens when absent.
func (Responses) Inject(body []byte, req *llm.Request, opts llm.InjectOptions) ([]byte, error) {
	if !opts.OutputCap || req.CapGiven {
		return nil, nil
	}
	return llm.SetFieldIn(opts.Buf, body, responsesFields, req.OutputCap, "max_output_tokens")
}

// NewUsageReader implements llm.API.
func (Responses) NewUsageReader(req *llm.Request, contentType string, opts llm.ReaderOptions) llm.UsageReader {
	if llm.IsEventStream(contentType) {
		return NewStreamReader(req.Model, opts, ResponsesDeltaText)
	}
	return llm.NewJSONReader(req.Model, opts, ParseUsage, ResponsesReplyText)
}

// RenderError implements llm.API.
func (Responses) RenderError(e llm.Error) llm.Reply { return RenderError(e) }
