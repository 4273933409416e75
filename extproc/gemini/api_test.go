package gemini

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

func TestMatchPath(t *testing.T) {
	tests := []struct {
		path   string
		model  string
		stream bool
		ok     bool
	}{
		{"/v1beta/models/gemini-2.5-flash:generateContent", "gemini-2.5-flash", false, true},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini-2.5-flash", true, true},
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini-2.5-pro", true, true},
		{"/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent", "gemini-2.5-flash", false, true},
		{"/v1beta/tunedModels/my-tuned-model:generateContent", "my-tuned-model", false, true},
		{"/gemini/v1beta/models/gemini%2D2.5:generateContent/", "gemini-2.5", false, true},
		{"/v1beta/models/gemini-2.5-flash:countTokens", "", false, false},
		{"/v1beta/models/:generateContent", "", false, false},
		{"/v1beta/files/x:generateContent", "", false, false},
		{"/v1/chat/completions", "", false, false},
		{"", "", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			model, stream, ok := ModelFromPath(tc.path)
			if model != tc.model || stream != tc.stream || ok != tc.ok || MatchPath(tc.path) != tc.ok {
				t.Errorf("got %q %v %v, want %q %v %v", model, stream, ok, tc.model, tc.stream, tc.ok)
			}
		})
	}
}

func TestInject(t *testing.T) {
	tests := []struct {
		name, body, path, want string // want: the gjson path that must hold 4096; "" for no edit
	}{
		{"no config", `{"contents":[]}`, "generationConfig.maxOutputTokens", "4096"},
		{"camel config", `{"contents":[],"generationConfig":{"temperature":1}}`, "generationConfig.maxOutputTokens", "4096"},
		{"snake config", `{"contents":[],"generation_config":{"temperature":1}}`, "generation_config.max_output_tokens", "4096"},
		{"cap given", `{"contents":[],"generationConfig":{"maxOutputTokens":9}}`, "", ""},
		{"snake cap given", `{"contents":[],"generation_config":{"max_output_tokens":9}}`, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := GenerateContent{}.ParseRequest("/v1beta/models/m:generateContent", []byte(tc.body), parseOpts)
			if err != nil {
				t.Fatal(err)
			}
			out, err := GenerateContent{}.Inject([]byte(tc.body), &req, llm.InjectOptions{OutputCap: true})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if out != nil {
					t.Fatalf("got edit %s, want none", out)
				}
				return
			}
			if got := gjson.GetBytes(out, tc.path).Raw; got != tc.want {
				t.Errorf("got %s = %q, want %q (body %s)", tc.path, got, tc.want, out)
			}
		})
	}
}

func TestRenderError(t *testing.T) {
	tests := []struct {
		kind   llm.ErrorKind
		code   int
		status string
	}{
		{llm.RateLimited, 429, "RESOURCE_EXHAUSTED"},
		{llm.Unavailable, 503, "UNAVAILABLE"},
		{llm.Unauthenticated, 401, "UNAUTHENTICATED"},
		{llm.InvalidRequest, 400, "INVALID_ARGUMENT"},
	}
	for _, tc := range tests {
		t.Run(tc.status, func(t *testing.T) {
			reply := GenerateContent{}.RenderError(llm.Error{Kind: tc.kind, Message: "why"})
			var got struct {
				Error struct {
					Code    int
					Message string
					Status  string
				}
			}
			if err := json.Unmarshal(reply.Body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Error.Code != tc.code || got.Error.Status != tc.status || got.Error.Message != "why" {
				t.Errorf("got %s, want code %d status %s", reply.Body, tc.code, tc.status)
			}
		})
	}
}

func TestParseRequestErrors(t *testing.T) {
	tests := []struct{ name, path, body string }{
		{"no model in path", "/v1beta/models:generateContent", `{"contents":[]}`},
		{"not json", "/v1beta/models/m:generateContent", `{`},
		{"contents missing", "/v1beta/models/m:generateContent", `{}`},
		{"content not object", "/v1beta/models/m:generateContent", `{"contents":[1]}`},
		{"too many candidates", "/v1beta/models/m:generateContent", `{"contents":[],"generationConfig":{"candidateCount":9}}`},
		{"fractional cap", "/v1beta/models/m:generateContent", `{"contents":[],"generationConfig":{"maxOutputTokens":1.5}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := (GenerateContent{}).ParseRequest(tc.path, []byte(tc.body), parseOpts); err == nil {
				t.Errorf("got no error")
			}
		})
	}
}

func TestStreamErrored(t *testing.T) {
	for file, want := range map[string]bool{"stream_sse_error.sse": true, "stream_sse_crlf.sse": false} {
		r := NewSSEReader("m", readerOpts())
		r.Write(readFixture(t, file))
		if r.Errored() != want {
			t.Errorf("%s: got errored %v, want %v", file, r.Errored(), want)
		}
	}
}
