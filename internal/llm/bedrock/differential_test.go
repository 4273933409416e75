package bedrock

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// The differential test: bodies full of repeated, escaped and differently
// cased keys, nulls, wrong types and odd numbers, parsed and edited by
// Converse and read by a model of Bedrock (converseView, written from the
// API reference over encoding/json's decoding), must agree on everything
// the reservation depends on.

var converseKnobs = []llmtest.Knob{
	{Path: []string{"messages"}, Required: true, Values: []string{
		`[{"role":"user","content":[{"text":"hello there"}]}]`,
		`[{"role":"user","content":[{"toolResult":{"toolUseId":"t","content":[{"text":"result text"}]}}]}]`,
		`[{"role":"user","Content":[{"text":"content in another case"}]}]`,
		`[{"role":"user","content":[{"text":"a","text":"a second text the provider keeps"}]}]`,
		`[{"role":"user","content":[{"Text":"text in another case"}]}]`,
		`[]`, `{}`,
	}},
	{Path: []string{"system"}, Values: []string{`[{"text":"be brief"}]`, `null`}},
	{Path: []string{"inferenceConfig"}, Values: []string{`null`, `{}`, `[]`, `{"temperature":0.5}`}},
	{Path: []string{"inferenceConfig", "maxTokens"}, Values: []string{`1`, `2000`, `64000`, `null`}},
	{Path: []string{"additionalModelRequestFields", "thinking"},
		Values: []string{`{"type":"enabled","budget_tokens":1024}`, `{"type":"disabled"}`, `null`}},
	{Path: []string{"additionalModelRequestFields", "thinking", "budget_tokens"}, Values: []string{`2048`, `null`}},
	{Path: []string{"additionalModelRequestFields", "reasoningConfig"},
		Values: []string{`{"type":"enabled","maxReasoningEffort":"low"}`, `{"type":"disabled"}`, `null`}},
}

// converseView is Bedrock's reading of a Converse body sent to path,
// which names the model and the streaming. Usage is always reported;
// Claude's maxTokens must exceed its thinking budget.
func converseView(path string, b map[string]any) (p llmtest.Provider, ok bool) {
	if p.Model, p.Stream, ok = ModelFromPath(path); !ok {
		return p, false
	}
	msgs, ok := b["messages"].([]any)
	if b["messages"] != nil && !ok {
		return p, false
	}
	system, _ := b["system"].([]any)
	for _, m := range msgs {
		content, _ := llmtest.Get(m, "content").([]any)
		p.TextRunes += blocksRunes(content)
	}
	p.TextRunes += blocksRunes(system)
	p.StreamUsage, p.Choices = true, 1
	inference, ok := llmtest.OptionalObject(b["inferenceConfig"])
	if !ok {
		return p, false
	}
	if p.OutputCap, ok = llmtest.OptionalInt(inference["maxTokens"], 0); !ok || inference["maxTokens"] != nil && p.OutputCap < 1 {
		return p, false
	}
	additional, ok := llmtest.OptionalObject(b["additionalModelRequestFields"])
	if !ok {
		return p, false
	}
	thinking, ok1 := llmtest.OptionalObject(additional["thinking"])
	thinkingType, ok2 := llmtest.OptionalString(thinking["type"])
	reasoning, ok3 := llmtest.OptionalObject(additional["reasoningConfig"])
	reasoningType, ok4 := llmtest.OptionalString(reasoning["type"])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return p, false
	}
	p.HiddenReasoning = thinking != nil && thinkingType != "disabled" || reasoning != nil && reasoningType != "disabled"
	if thinkingType == "enabled" {
		budget, ok := llmtest.OptionalInt(thinking["budget_tokens"], 0)
		if !ok || budget < 1 || p.OutputCap != 0 && p.OutputCap <= budget {
			return p, false
		}
	}
	return p, true
}

// blocksRunes counts the text of text blocks, and of tool results.
func blocksRunes(blocks []any) int64 {
	var n int64
	for _, b := range blocks {
		n += llmtest.Runes(llmtest.Get(b, "text"))
		inner, _ := llmtest.Get(b, "toolResult", "content").([]any)
		n += blocksRunes(inner)
	}
	return n
}

var target = llmtest.RequestTarget{API: Converse{}, Path: "/model/anthropic.claude-sonnet-4-5%3A0/converse-stream", Knobs: converseKnobs, View: converseView}

func TestDifferential(t *testing.T) {
	llmtest.RunDifferential(t, target, 10000, 400)
}
