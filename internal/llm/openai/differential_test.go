package openai

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// The differential tests: bodies full of repeated, escaped and
// differently cased keys, nulls, wrong types and odd numbers, parsed and
// edited by each API and read by a model of the provider (the View
// below, written from OpenAI's API reference over encoding/json's
// decoding), must agree on everything the reservation depends on.

// Values the knobs share.
var (
	capValues    = []string{`1`, `64`, `64000`, `null`}
	choiceValues = []string{`1`, `2`, `5`, `128`, `null`}
	flagValues   = []string{`true`, `false`, `null`}
	modelValues  = []string{`"gpt-4o-mini"`, `"o1-pro"`, `"o3"`, `"gpt-5"`, `"m"`, `""`}
)

var streamOptionKnobs = []llmtest.Knob{
	{Path: []string{"stream_options"}, Values: []string{`null`, `{}`, `{"include_usage":false}`}},
	{Path: []string{"stream_options", "include_usage"}, Values: flagValues},
}

var chatKnobs = append([]llmtest.Knob{
	{Path: []string{"model"}, Values: modelValues, Required: true},
	{Path: []string{"messages"}, Required: true, Values: []string{
		`[{"role":"user","content":"hello there"}]`,
		`[{"role":"system","content":"be brief","name":"ops"},{"role":"user","content":"why"}]`,
		`[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]}]`,
		`[{"role":"user","Content":"text a Go server reads as the content"}]`,
		`[{"role":"user","content":"a","content":"a second content the provider keeps"}]`,
		`[{"role":"user","content":[{"type":"text","text":"x","TEXT":"text in another case"}]}]`,
		`[{"role":"user","content":[{"Type":"text","text":"a part whose type is hidden"}]}]`,
		`[{"role":"user","content":"\u0068\u0069 escaped"}]`,
		`[{"role":"user","con\u0074ent":"an escaped key"}]`,
		`[]`, `{}`, `["hi"]`,
	}},
	{Path: []string{"max_tokens"}, Values: capValues},
	{Path: []string{"max_completion_tokens"}, Values: capValues},
	{Path: []string{"n"}, Values: choiceValues},
	{Path: []string{"stream"}, Values: flagValues},
	{Path: []string{"reasoning_effort"}, Values: []string{`"low"`, `"minimal"`, `"none"`, `null`}},
	{Path: []string{"temperature"}, Values: []string{`0.5`}},
}, streamOptionKnobs...)

// chatView is OpenAI's reading of a chat body; model, when set, is the
// Azure deployment's, and the body's is ignored.
func chatView(model string) llmtest.View {
	return func(_ string, b map[string]any) (p llmtest.Provider, ok bool) {
		if p.Model, ok = bodyModel(b, model); !ok {
			return p, false
		}
		msgs, ok := b["messages"].([]any)
		if !ok {
			return p, false
		}
		for _, m := range msgs {
			mo, ok := m.(map[string]any)
			if !ok {
				return p, false
			}
			p.TextRunes += llmtest.Runes(mo["name"])
			switch c := mo["content"].(type) {
			case string:
				p.TextRunes += llmtest.Runes(c)
			case []any:
				for _, part := range c {
					if llmtest.Get(part, "type") == "text" {
						p.TextRunes += llmtest.Runes(llmtest.Get(part, "text"))
					}
				}
			}
		}
		if p.Stream, p.StreamUsage, ok = streamView(b); !ok {
			return p, false
		}
		// Servers read one cap or the other: the reservation covers the
		// larger.
		for _, field := range []string{"max_completion_tokens", "max_tokens"} {
			n, ok := llmtest.OptionalInt(b[field], 0)
			if !ok || b[field] != nil && n < 1 {
				return p, false
			}
			p.OutputCap = max(p.OutputCap, n)
		}
		if p.Choices, ok = llmtest.OptionalInt(b["n"], 1); !ok || p.Choices < 1 {
			return p, false
		}
		effort, ok := llmtest.OptionalString(b["reasoning_effort"])
		p.HiddenReasoning = effort != "" && effort != "none"
		return p, ok
	}
}

// bodyModel returns model, or the body's model when model is "".
func bodyModel(b map[string]any, model string) (string, bool) {
	if model != "" {
		return model, true
	}
	m, ok := b["model"].(string)
	return m, ok && m != ""
}

// streamView reads stream and stream_options.include_usage.
func streamView(b map[string]any) (stream, usage, ok bool) {
	if stream, ok = llmtest.OptionalBool(b["stream"]); !ok {
		return false, false, false
	}
	opts, ok := llmtest.OptionalObject(b["stream_options"])
	if !ok {
		return false, false, false
	}
	usage, ok = llmtest.OptionalBool(opts["include_usage"])
	return stream, usage, ok
}

var completionsKnobs = append([]llmtest.Knob{
	{Path: []string{"model"}, Values: modelValues, Required: true},
	{Path: []string{"prompt"}, Required: true, Values: []string{
		`"say hi"`, `["a","bb"]`, `[1,2,3]`, `[[1,2],[3]]`, `[]`, `["a",1]`, `[["a"]]`, `5`,
	}},
	{Path: []string{"suffix"}, Values: []string{`"end"`, `null`}},
	{Path: []string{"max_tokens"}, Values: capValues},
	{Path: []string{"n"}, Values: choiceValues},
	{Path: []string{"best_of"}, Values: choiceValues},
	{Path: []string{"stream"}, Values: flagValues},
}, streamOptionKnobs...)

// completionsView is OpenAI's reading of a completions body.
func completionsView(_ string, b map[string]any) (p llmtest.Provider, ok bool) {
	if p.Model, ok = bodyModel(b, ""); !ok {
		return p, false
	}
	prompts := int64(1)
	switch v := b["prompt"].(type) {
	case string:
		p.TextRunes = llmtest.Runes(v)
	case []any:
		if len(v) == 0 {
			return p, false
		}
		var strs, ints, arrays int64
		for _, item := range v {
			switch item := item.(type) {
			case string:
				strs++
				p.TextRunes += llmtest.Runes(item)
			case []any:
				arrays++
			default:
				ints++
			}
		}
		switch int64(len(v)) {
		case strs, arrays:
			prompts = int64(len(v))
		case ints:
		default:
			return p, false // a mixed array
		}
	default:
		return p, false
	}
	if p.Stream, p.StreamUsage, ok = streamView(b); !ok {
		return p, false
	}
	if p.OutputCap, ok = llmtest.OptionalInt(b["max_tokens"], 0); !ok || b["max_tokens"] != nil && p.OutputCap < 1 {
		return p, false
	}
	n, ok1 := llmtest.OptionalInt(b["n"], 1)
	bestOf, ok2 := llmtest.OptionalInt(b["best_of"], 1)
	if !ok1 || !ok2 || n < 1 || bestOf < 1 {
		return p, false
	}
	// best_of completions are generated and billed; n are returned.
	p.Choices = max(n, bestOf) * prompts
	return p, true
}

var embeddingsKnobs = []llmtest.Knob{
	{Path: []string{"model"}, Values: modelValues, Required: true},
	{Path: []string{"input"}, Required: true, Values: []string{`"embed me"`, `["a","bb"]`, `[1,2]`, `[[1],[2,3]]`, `{}`}},
	{Path: []string{"stream"}, Values: flagValues},
	{Path: []string{"dimensions"}, Values: []string{`256`}},
}

// embeddingsView is OpenAI's reading of an embeddings body: no output.
func embeddingsView(_ string, b map[string]any) (p llmtest.Provider, ok bool) {
	if p.Model, ok = bodyModel(b, ""); !ok {
		return p, false
	}
	switch v := b["input"].(type) {
	case string:
		p.TextRunes = llmtest.Runes(v)
	case []any:
		for _, item := range v {
			p.TextRunes += llmtest.Runes(item)
		}
	default:
		return p, false
	}
	p.Choices = 1
	return p, true
}

var responsesKnobs = []llmtest.Knob{
	{Path: []string{"model"}, Values: modelValues, Required: true},
	{Path: []string{"input"}, Required: true, Values: []string{
		`"hello"`,
		`[{"role":"user","content":"hello there"}]`,
		`[{"role":"user","content":[{"type":"input_text","text":"look at this"}]}]`,
		`[{"role":"user","Content":"hidden"}]`,
		`[{"type":"message","role":"user","content":"a","content":"bbbbbbbbbbbb"}]`,
		`5`, `["x"]`,
	}},
	{Path: []string{"instructions"}, Values: []string{`"be brief"`, `null`}},
	{Path: []string{"max_output_tokens"}, Values: []string{`16`, `64`, `64000`, `null`, `8`}},
	{Path: []string{"stream"}, Values: flagValues},
	{Path: []string{"background"}, Values: flagValues},
	{Path: []string{"reasoning"}, Values: []string{`{"effort":"low"}`, `{"effort":"none"}`, `{}`, `null`}},
	{Path: []string{"reasoning", "effort"}, Values: []string{`"high"`, `"none"`, `null`}},
}

// responsesView is OpenAI's reading of a Responses body, which always
// reports usage.
func responsesView(_ string, b map[string]any) (p llmtest.Provider, ok bool) {
	if p.Model, ok = bodyModel(b, ""); !ok {
		return p, false
	}
	switch v := b["input"].(type) {
	case string:
		p.TextRunes = llmtest.Runes(v)
	case []any:
		for _, item := range v {
			if _, ok := item.(map[string]any); !ok {
				return p, false
			}
			switch c := llmtest.Get(item, "content").(type) {
			case string:
				p.TextRunes += llmtest.Runes(c)
			case []any:
				for _, part := range c {
					p.TextRunes += llmtest.Runes(llmtest.Get(part, "text"))
				}
			}
		}
	case nil:
	default:
		return p, false
	}
	p.TextRunes += llmtest.Runes(b["instructions"])
	if p.Stream, ok = llmtest.OptionalBool(b["stream"]); !ok {
		return p, false
	}
	p.StreamUsage = true
	// The API's minimum is 16.
	if p.OutputCap, ok = llmtest.OptionalInt(b["max_output_tokens"], 0); !ok || b["max_output_tokens"] != nil && p.OutputCap < 16 {
		return p, false
	}
	if p.Background, ok = llmtest.OptionalBool(b["background"]); !ok {
		return p, false
	}
	reasoning, ok := llmtest.OptionalObject(b["reasoning"])
	if !ok {
		return p, false
	}
	effort, ok := llmtest.OptionalString(reasoning["effort"])
	p.HiddenReasoning = reasoning != nil && effort != "none"
	p.Choices = 1
	return p, ok
}

// targets are the APIs with their knobs and views.
var targets = []llmtest.RequestTarget{
	{API: Chat{}, Path: "/v1/chat/completions", Knobs: chatKnobs, View: chatView("")},
	{API: Chat{}, Path: "/openai/deployments/d/chat/completions", Knobs: chatKnobs, View: chatView("gpt-4o"), Model: "gpt-4o"},
	{API: Completions{}, Path: "/v1/completions", Knobs: completionsKnobs, View: completionsView},
	{API: Completions{ProviderDefaultCap: true}, Path: "/v1/completions", Knobs: completionsKnobs, View: completionsView},
	{API: Embeddings{}, Path: "/v1/embeddings", Knobs: embeddingsKnobs, View: embeddingsView, NoOutput: true},
	{API: Responses{}, Path: "/v1/responses", Knobs: responsesKnobs, View: responsesView},
}

func TestDifferential(t *testing.T) {
	for _, target := range targets {
		t.Run(target.API.Name()+target.Model, func(t *testing.T) {
			llmtest.RunDifferential(t, target, 10000, 400)
		})
	}
}
