package llm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestTopFields(t *testing.T) {
	doc := gjson.Parse(`{"a":1,"nested":{"b":2},"b":3,"\u0063":5}`)
	got := TopFields(doc, nil, "a", "b", "c", "missing")
	if len(got) != 4 {
		t.Fatalf("got %d results, want 4", len(got))
	}
	// A nested key is not a top-level one; an escaped key is read as
	// providers decode it.
	if got[0].Raw != "1" || got[1].Raw != "3" || got[2].Raw != "5" || got[3].Exists() {
		t.Errorf("got a=%s b=%s c=%s missing=%s, want 1, 3, 5 and nothing", got[0].Raw, got[1].Raw, got[2].Raw, got[3].Raw)
	}
}

func TestFieldsBuilderPanics(t *testing.T) {
	tests := []struct {
		name  string
		build func()
	}{
		{"repeated", func() { NewFields().Read("a", "a") }},
		{"repeated in another case", func() { NewFields().Read("max_tokens", "MAX_TOKENS") }},
		{"alias of nothing", func() { NewFields().Alias("a", "b") }},
		{"alias taken", func() { NewFields().Read("a", "b").Alias("a", "b") }},
		{"too many", func() {
			f := NewFields()
			for i := range maxFields + 1 {
				f.Read(strings.Repeat("x", i+1))
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("got no panic for a declaration that contradicts itself")
				}
			}()
			tc.build()
		})
	}
}

// editFields are the fields the edit tests name: a Gemini-like config
// with aliases, and an OpenAI-like option object.
var editFields = NewFields().Read("model", "max_tokens").
	Nest("stream_options", NewFields().Read("include_usage")).
	Nest("generationConfig", NewFields().Read("maxOutputTokens", "temperature").Alias("maxOutputTokens", "max_output_tokens")).
	Alias("generationConfig", "generation_config")

func TestSetField(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		value any
		path  []string
		want  string
	}{
		{"add at the end", `{"model":"m"  }`, 7, []string{"max_tokens"}, `{"model":"m"  ,"max_tokens":7}`},
		{"replace", `{"max_tokens":null,"model":"m"}`, 7, []string{"max_tokens"}, `{"max_tokens":7,"model":"m"}`},
		{"replace an escaped key", `{"max_t\u006fkens":null}`, 7, []string{"max_tokens"}, `{"max_t\u006fkens":7}`},
		{"empty object", ` { } `, 7, []string{"max_tokens"}, ` { "max_tokens":7} `},
		{"add nested", `{"model":"m"}`, true, []string{"stream_options", "include_usage"}, `{"model":"m","stream_options":{"include_usage":true}}`},
		{"into null", `{"stream_options":null}`, true, []string{"stream_options", "include_usage"}, `{"stream_options":{"include_usage":true}}`},
		{"into an object", `{"stream_options":{"x":1}}`, true, []string{"stream_options", "include_usage"}, `{"stream_options":{"x":1,"include_usage":true}}`},
		{"into an empty object", `{"stream_options":{}}`, true, []string{"stream_options", "include_usage"}, `{"stream_options":{"include_usage":true}}`},
		{"replace false", `{"stream_options":{"include_usage":false}}`, true, []string{"stream_options", "include_usage"}, `{"stream_options":{"include_usage":true}}`},
		{"alias kept", `{"generation_config":{"temperature":1}}`, 9, []string{"generationConfig", "maxOutputTokens"}, `{"generation_config":{"temperature":1,"max_output_tokens":9}}`},
		{"alias edited", `{"generation_config":{"maxOutputTokens":null}}`, 9, []string{"generationConfig", "maxOutputTokens"}, `{"generation_config":{"maxOutputTokens":9}}`},
		{"alias null", `{"generation_config":null}`, 9, []string{"generationConfig", "maxOutputTokens"}, `{"generation_config":{"max_output_tokens":9}}`},
		{"declared name", `{}`, 9, []string{"generationConfig", "maxOutputTokens"}, `{"generationConfig":{"maxOutputTokens":9}}`},
		{"value after a long prompt", `{"p":"` + strings.Repeat("x", 100) + `","max_tokens":1}`, 2, []string{"max_tokens"}, `{"p":"` + strings.Repeat("x", 100) + `","max_tokens":2}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckBody([]byte(tc.body), editFields); err != nil {
				t.Fatalf("the body does not check: %v", err)
			}
			out, err := SetField([]byte(tc.body), editFields, tc.value, tc.path...)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got  %s\nwant %s", out, tc.want)
			}
			// The edit is unambiguous: encoding/json reads the value where
			// it was put.
			var m map[string]any
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatal(err)
			}
			if err := CheckBody(out, editFields); err != nil {
				t.Errorf("the edited body does not check: %v", err)
			}
		})
	}
}

func TestSetFieldErrors(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		value any
		path  []string
		want  string
	}{
		{"not an object on the way", `{"stream_options":5}`, true, []string{"stream_options", "include_usage"}, "stream_options is not an object"},
		{"undeclared", `{}`, 1, []string{"nope"}, `field "nope" is not declared`},
		{"undeclared inside", `{}`, 1, []string{"max_tokens", "x"}, `field "x" is not declared`},
		{"unencodable", `{}`, make(chan int), []string{"max_tokens"}, "editing request body: "},
		{"not an object", `[]`, 1, []string{"max_tokens"}, "JSON object"},
		{"no path", `{}`, 1, nil, "no field named"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SetField([]byte(tc.body), editFields, tc.value, tc.path...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
