package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// exactTarget has the shapes the request types use: scalars, a pointer to a
// nested struct, and a field with an alias.
type exactTarget struct {
	Model     string `json:"model"`
	MaxTokens *int   `json:"max_tokens"`
	Stream    bool   `json:"stream"`
	Options   *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Config struct {
		MaxOutput *int `json:"maxOutputTokens" alias:"max_output_tokens"`
	} `json:"generationConfig" alias:"generation_config"`
}

// TestUnmarshalExact checks fakellm reads bodies as the providers' Python back
// ends do: exact keys, the last of duplicates.
func TestUnmarshalExact(t *testing.T) {
	n := func(v int) *int { return &v }
	cases := []struct {
		name    string
		body    string
		check   func(t *testing.T, got exactTarget)
		wantErr string
	}{
		{name: "last duplicate wins", body: `{"model":"a","max_tokens":1,"model":"b","max_tokens":64000}`,
			check: func(t *testing.T, got exactTarget) {
				if got.Model != "b" || got.MaxTokens == nil || *got.MaxTokens != 64000 {
					t.Errorf("got model %q max_tokens %v, want b and 64000", got.Model, deref(got.MaxTokens))
				}
			}},
		{name: "duplicate nulls", body: `{"max_tokens":null,"max_tokens":null}`,
			check: func(t *testing.T, got exactTarget) {
				if got.MaxTokens != nil {
					t.Errorf("max_tokens got %d, want none", *got.MaxTokens)
				}
			}},
		{name: "null after a value", body: `{"max_tokens":5,"max_tokens":null}`,
			check: func(t *testing.T, got exactTarget) {
				if got.MaxTokens != nil {
					t.Errorf("max_tokens got %d, want none (the last key is null)", *got.MaxTokens)
				}
			}},
		{name: "case variants ignored", body: `{"MAX_TOKENS":5,"Max_Tokens":6,"Model":"x","ſtream":true}`,
			check: func(t *testing.T, got exactTarget) {
				if got.MaxTokens != nil || got.Model != "" || got.Stream {
					t.Errorf("got %+v, want nothing read from keys that only fold to the fields' names", got)
				}
			}},
		{name: "nested duplicate", body: `{"stream_options":{"include_usage":true,"include_usage":false}}`,
			check: func(t *testing.T, got exactTarget) {
				if got.Options == nil || got.Options.IncludeUsage {
					t.Errorf("stream_options got %+v, want include_usage false (the last)", got.Options)
				}
			}},
		{name: "duplicate object, last wins whole", body: `{"stream_options":{"include_usage":true},"stream_options":{}}`,
			check: func(t *testing.T, got exactTarget) {
				if got.Options == nil || got.Options.IncludeUsage {
					t.Errorf("stream_options got %+v, want the last object, without include_usage", got.Options)
				}
			}},
		{name: "alias", body: `{"generation_config":{"max_output_tokens":7}}`,
			check: func(t *testing.T, got exactTarget) {
				if !reflect.DeepEqual(got.Config.MaxOutput, n(7)) {
					t.Errorf("maxOutputTokens got %v, want 7 from the snake_case names", deref(got.Config.MaxOutput))
				}
			}},
		{name: "camelCase before alias", body: `{"generationConfig":{"maxOutputTokens":7},"generation_config":{"max_output_tokens":9}}`,
			check: func(t *testing.T, got exactTarget) {
				if !reflect.DeepEqual(got.Config.MaxOutput, n(7)) {
					t.Errorf("maxOutputTokens got %v, want 7 from the camelCase names", deref(got.Config.MaxOutput))
				}
			}},
		{name: "unknown keys ignored", body: `{"messages":[{"role":"user"}],"model":"m"}`,
			check: func(t *testing.T, got exactTarget) {
				if got.Model != "m" {
					t.Errorf("model got %q, want m", got.Model)
				}
			}},
		{name: "array body", body: `[1]`, wantErr: "JSON object"},
		{name: "null body", body: `null`, wantErr: "JSON object"},
		{name: "string field not an object", body: `{"stream_options":"yes"}`, wantErr: "stream_options"},
		{name: "wrong type", body: `{"max_tokens":"many"}`, wantErr: "max_tokens"},
		{name: "trailing garbage", body: `{"model":"m"} x`, wantErr: "invalid"},
		{name: "truncated", body: `{"model":`, wantErr: "unexpected end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got exactTarget
			err := unmarshalExact([]byte(c.body), reflect.ValueOf(&got).Elem())
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got error %v, want one mentioning %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, got)
		})
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestSeenHeaders checks every API reports the model and output cap it
// answered with, read as the provider reads them, and generates accordingly.
func TestSeenHeaders(t *testing.T) {
	srv := newTestServer(t)
	cases := []struct {
		name, path, body   string
		wantModel, wantCap string
		wantOutput         int // with x-fakellm-output-tokens: 100
	}{
		{"anthropic duplicate max_tokens", messagesPath,
			`{"model":"claude-haiku-4-5","max_tokens":1,"messages":[],"max_tokens":64000}`, "claude-haiku-4-5", "64000", 100},
		{"anthropic duplicate model", messagesPath,
			`{"model":"claude-haiku-4-5","max_tokens":10,"model":"claude-opus-4-1"}`, "claude-opus-4-1", "10", 10},
		{"chat two null caps", chatPath, `{"model":"gpt-4o","max_tokens":null,"max_tokens":null}`, "gpt-4o", "none", 100},
		{"chat case-variant cap ignored", chatPath, `{"model":"gpt-4o","MAX_TOKENS":5}`, "gpt-4o", "none", 100},
		{"chat max_completion_tokens wins", chatPath, `{"model":"gpt-4o","max_tokens":50,"max_completion_tokens":20}`, "gpt-4o", "20", 20},
		{"responses", responsesPath, `{"model":"gpt-4o","max_output_tokens":16,"max_output_tokens":32}`, "gpt-4o", "32", 32},
		{"gemini", geminiGenerate, `{"generationConfig":{"maxOutputTokens":3,"maxOutputTokens":60}}`, "gemini-2.5-flash", "60", 60},
		{"gemini snake_case", geminiGenerate, `{"generation_config":{"max_output_tokens":8}}`, "gemini-2.5-flash", "8", 8},
		{"azure deployment is the model", "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21",
			`{"model":"gpt-4o-mini","max_tokens":30}`, "prod-4o", "30", 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, srv, c.path, c.body, map[string]string{hdrOutputTokens: "100", hdrInputTokens: "1"})
			if r.status != 200 {
				t.Fatalf("status got %d, want 200: %s", r.status, r.body)
			}
			if got := r.header.Get(hdrSeenModel); got != c.wantModel {
				t.Errorf("%s: got %q, want %q", hdrSeenModel, got, c.wantModel)
			}
			if got := r.header.Get(hdrSeenMaxTokens); got != c.wantCap {
				t.Errorf("%s: got %q, want %q", hdrSeenMaxTokens, got, c.wantCap)
			}
			// Every API's usage has the output count under one of these
			// names; the response says what was generated.
			m := decodeJSON(t, r.body)
			var out int
			switch {
			case m["usageMetadata"] != nil:
				out = num(t, m, "usageMetadata", "candidatesTokenCount")
			case strings.HasSuffix(strings.Split(c.path, "?")[0], "/chat/completions"):
				out = num(t, m, "usage", "completion_tokens")
			default:
				out = num(t, m, "usage", "output_tokens")
			}
			if out != c.wantOutput {
				t.Errorf("output tokens got %d, want %d", out, c.wantOutput)
			}
		})
	}
}

// FuzzUnmarshalExact checks the body reader never panics and accepts only
// what encoding/json accepts as an object.
func FuzzUnmarshalExact(f *testing.F) {
	for _, s := range []string{
		`{"model":"a","max_tokens":1,"model":"b"}`, `{"stream_options":{"include_usage":true}}`,
		`{"generation_config":{"max_output_tokens":7}}`, `[]`, `null`, `{"max_tokens":1e99}`,
		`{"stream_options":null}`, `{"MAX_TOKENS":5}`, `{"model":"\u00e9"}`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got exactTarget
		err := unmarshalExact(body, reflect.ValueOf(&got).Elem())
		if err == nil {
			var m map[string]any
			if jerr := json.Unmarshal(body, &m); jerr != nil || m == nil {
				t.Fatalf("accepted %q, which encoding/json does not read as an object (%v)", body, jerr)
			}
		}
	})
}
