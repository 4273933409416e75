package gemini

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// The differential test: bodies full of repeated, escaped and differently
// cased keys, fields under both their proto names, nulls, wrong types and
// odd numbers, parsed and edited by GenerateContent and read by a model
// of Google's parser (generateView, over encoding/json's decoding), must
// agree on everything the reservation depends on.

var generateKnobs = []llmtest.Knob{
	{Path: []string{"contents"}, Required: true, Values: []string{
		`[{"role":"user","parts":[{"text":"hello there"}]}]`,
		`[{"role":"user","parts":[{"text":"look"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]}]`,
		`[{"role":"user","Parts":[{"text":"parts in another case"}]}]`,
		`[{"role":"user","parts":[{"text":"a","text":"a second text the provider keeps"}]}]`,
		`[{"role":"user","parts":[{"TEXT":"text in another case"}]}]`,
		`[]`, `{}`, `[5]`,
	}},
	{Path: []string{"systemInstruction|system_instruction"}, Values: []string{`{"parts":[{"text":"be brief"}]}`, `null`}},
	{Path: []string{"generationConfig|generation_config"}, Values: []string{`null`, `{}`, `[]`, `{"temperature":1}`}},
	{Path: []string{"generationConfig|generation_config", "maxOutputTokens|max_output_tokens"}, Values: []string{`1`, `1024`, `64000`, `null`}},
	{Path: []string{"generationConfig|generation_config", "candidateCount|candidate_count"}, Values: []string{`1`, `2`, `8`, `null`}},
	{Path: []string{"generationConfig|generation_config", "thinkingConfig|thinking_config"}, Values: []string{`{}`, `{"thinkingBudget":0}`, `null`}},
	{Path: []string{"generationConfig|generation_config", "thinkingConfig|thinking_config", "thinkingBudget|thinking_budget"},
		Values: []string{`0`, `-1`, `512`, `null`}},
}

// proto returns the field of o under its camelCase name or its
// snake_case one; both is a duplicate field, which Google refuses.
func proto(o any, camel, snake string) (any, bool) {
	m, _ := o.(map[string]any)
	a, hasA := m[camel]
	b, hasB := m[snake]
	if hasA && hasB {
		return nil, false
	}
	if hasA {
		return a, true
	}
	return b, true
}

// generateView is Google's reading of a generateContent body sent to
// path, which names the model and the streaming. Usage is always
// reported.
func generateView(path string, b map[string]any) (p llmtest.Provider, ok bool) {
	if p.Model, p.Stream, ok = ModelFromPath(path); !ok {
		return p, false
	}
	contents, ok := b["contents"].([]any)
	if !ok {
		return p, false
	}
	sys, ok := proto(b, "systemInstruction", "system_instruction")
	if !ok {
		return p, false
	}
	for _, c := range append(contents, sys) {
		parts, _ := llmtest.Get(c, "parts").([]any)
		for _, part := range parts {
			p.TextRunes += llmtest.Runes(llmtest.Get(part, "text"))
		}
	}
	p.StreamUsage = true
	cfgValue, ok1 := proto(b, "generationConfig", "generation_config")
	cfg, ok2 := llmtest.OptionalObject(cfgValue)
	capValue, ok3 := proto(cfg, "maxOutputTokens", "max_output_tokens")
	countValue, ok4 := proto(cfg, "candidateCount", "candidate_count")
	thinkingValue, ok5 := proto(cfg, "thinkingConfig", "thinking_config")
	thinking, ok6 := llmtest.OptionalObject(thinkingValue)
	budgetValue, ok7 := proto(thinking, "thinkingBudget", "thinking_budget")
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 {
		return p, false
	}
	if p.OutputCap, ok = llmtest.OptionalInt(capValue, 0); !ok || capValue != nil && p.OutputCap < 1 {
		return p, false
	}
	if p.Choices, ok = llmtest.OptionalInt(countValue, 1); !ok || p.Choices < 1 {
		return p, false
	}
	// A thinkingConfig without a budget leaves thinking at the model's
	// default, on; a budget of 0 turns it off.
	budget, ok := llmtest.OptionalInt(budgetValue, -1)
	p.HiddenReasoning = thinking != nil && budget != 0
	return p, ok
}

var targets = []llmtest.RequestTarget{
	{API: GenerateContent{}, Path: "/v1beta/models/gemini-2.5-flash:generateContent", Knobs: generateKnobs, View: generateView},
	{API: GenerateContent{}, Path: "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", Knobs: generateKnobs, View: generateView},
}

func TestDifferential(t *testing.T) {
	for _, target := range targets {
		llmtest.RunDifferential(t, target, 10000, 400)
	}
}
