package anthropic

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// The differential test: bodies full of repeated, escaped and differently
// cased keys, nulls, wrong types and odd numbers, parsed and edited by
// Messages and read by a model of Anthropic (messagesView, written from
// the API reference over encoding/json's decoding), must agree on
// everything the reservation depends on.

var messagesKnobs = []llmtest.Knob{
	{Path: []string{"model"}, Values: []string{`"claude-sonnet-4-5"`, `"claude-opus-4-1"`, `""`}, Required: true},
	{Path: []string{"messages"}, Required: true, Values: []string{
		`[{"role":"user","content":"hello there"}]`,
		`[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]`,
		`[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"result text"}]}]}]`,
		`[{"role":"user","Content":"text a Go server reads as the content"}]`,
		`[{"role":"user","content":"a","content":"a second content the provider keeps"}]`,
		`[{"role":"user","content":[{"type":"text","text":"x","Text":"text in another case"}]}]`,
		`[{"role":"user","content":[{"TYPE":"text","text":"a block whose type is hidden"}]}]`,
		`[]`, `{}`,
	}},
	{Path: []string{"system"}, Values: []string{`"be brief"`, `[{"type":"text","text":"be kind"}]`, `null`, `5`}},
	{Path: []string{"max_tokens"}, Values: []string{`1`, `1024`, `64000`, `null`}},
	{Path: []string{"stream"}, Values: []string{`true`, `false`, `null`}},
	{Path: []string{"thinking"}, Values: []string{`{"type":"enabled","budget_tokens":2048}`, `{"type":"adaptive"}`, `{"type":"disabled"}`, `null`}},
	{Path: []string{"thinking", "type"}, Values: []string{`"enabled"`, `"disabled"`, `"adaptive"`}},
	{Path: []string{"thinking", "budget_tokens"}, Values: []string{`1024`, `8000`, `null`}},
	{Path: []string{"temperature"}, Values: []string{`0.5`}},
}

// messagesView is Anthropic's reading of a Messages body. It always
// reports usage; max_tokens is required and must exceed the thinking
// budget.
func messagesView(_ string, b map[string]any) (p llmtest.Provider, ok bool) {
	if p.Model, ok = b["model"].(string); !ok || p.Model == "" {
		return p, false
	}
	msgs, ok := b["messages"].([]any)
	if !ok {
		return p, false
	}
	p.TextRunes += contentRunes(b["system"])
	for _, m := range msgs {
		if _, ok := m.(map[string]any); !ok {
			return p, false
		}
		p.TextRunes += contentRunes(llmtest.Get(m, "content"))
	}
	if p.Stream, ok = llmtest.OptionalBool(b["stream"]); !ok {
		return p, false
	}
	p.StreamUsage, p.Choices = true, 1
	if p.OutputCap, ok = llmtest.OptionalInt(b["max_tokens"], 0); !ok || p.OutputCap < 1 {
		return p, false
	}
	thinking, ok := llmtest.OptionalObject(b["thinking"])
	if !ok {
		return p, false
	}
	typ, ok := llmtest.OptionalString(thinking["type"])
	if !ok {
		return p, false
	}
	p.HiddenReasoning = thinking != nil && typ != "disabled"
	if typ == "enabled" {
		budget, ok := llmtest.OptionalInt(thinking["budget_tokens"], 0)
		if !ok || budget < 1 || p.OutputCap <= budget {
			return p, false
		}
	}
	return p, true
}

// contentRunes counts the text of a string or of text blocks, and of the
// blocks of tool results.
func contentRunes(v any) int64 {
	switch v := v.(type) {
	case string:
		return llmtest.Runes(v)
	case []any:
		var n int64
		for _, block := range v {
			switch llmtest.Get(block, "type") {
			case "text":
				n += llmtest.Runes(llmtest.Get(block, "text"))
			case "tool_result":
				n += contentRunes(llmtest.Get(block, "content"))
			}
		}
		return n
	}
	return 0
}

var target = llmtest.RequestTarget{API: Messages{}, Path: "/v1/messages", Knobs: messagesKnobs, View: messagesView}

func TestDifferential(t *testing.T) {
	llmtest.RunDifferential(t, target, 10000, 400)
}
