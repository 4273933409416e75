package gemini

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

func TestMatchPath(t *testing.T) {
	llmtest.CheckPaths(t, ModelFromPath, MatchPath, []llmtest.PathCase{
		{Path: "/v1beta/models/gemini-2.5-flash:generateContent", Model: "gemini-2.5-flash", OK: true},
		{Path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", Model: "gemini-2.5-flash", Stream: true, OK: true},
		{Path: "/v1beta/models/gemini-2.5-pro:streamGenerateContent", Model: "gemini-2.5-pro", Stream: true, OK: true},
		{Path: "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent", Model: "gemini-2.5-flash", OK: true},
		{Path: "/v1beta/tunedModels/my-tuned-model:generateContent", Model: "my-tuned-model", OK: true},
		{Path: "/gemini/v1beta/models/gemini%2D2.5:generateContent/", Model: "gemini-2.5", OK: true},
		{Path: "/v1beta/models/gemini-2.0-flash%3AgenerateContent", Model: "gemini-2.0-flash", OK: true},
		{Path: "/v1beta/models/gemini-2.0-flash%3astreamGenerateContent?alt=sse", Model: "gemini-2.0-flash", Stream: true, OK: true},
		{Path: "/v1beta/models%2Fgemini-2.0-flash%3AgenerateContent", Model: "gemini-2.0-flash", OK: true},
		// Decoded once, as the upstream decodes it: "%3A" is not a colon.
		{Path: "/v1beta/models/m%253AgenerateContent"},
		{Path: "/v1beta/models/gemini-2.5-flash:countTokens"},
		{Path: "/v1beta/models/:generateContent", Routed: true},
		{Path: ":generateContent", Routed: true},
		// A Vertex AI endpoint (a deployed tuned model) is a generation
		// too; so is any path that ends in the custom method.
		{Path: "/v1/projects/p/locations/l/endpoints/123:generateContent", Model: "123", OK: true},
		{Path: "/v1beta/files/x:generateContent", Model: "x", OK: true},
		{Path: "0:generateContent", Model: "0", OK: true},
		{Path: "/v1/chat/completions"},
		{Path: ""},
	})
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
		{"null config", `{"contents":[],"generationConfig":null}`, "generationConfig.maxOutputTokens", "4096"},
		{"null snake config", `{"contents":[],"generation_config":null}`, "generation_config.max_output_tokens", "4096"},
		{"null cap", `{"contents":[],"generationConfig":{"maxOutputTokens":null}}`, "generationConfig.maxOutputTokens", "4096"},
		{"null snake cap in a camel config", `{"contents":[],"generationConfig":{"max_output_tokens":null}}`, "generationConfig.max_output_tokens", "4096"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := GenerateContent{}.ParseRequest("/v1beta/models/m:generateContent", []byte(tc.body), llmtest.ParseOptions())
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
	llmtest.CheckRefused(t, GenerateContent{}, []llmtest.BadRequest{
		{Name: "no model in path", Path: "/v1beta/models/:generateContent", Body: `{"contents":[]}`},
		{Name: "not json", Path: "/v1beta/models/m:generateContent", Body: `{`},
		{Name: "contents missing", Path: "/v1beta/models/m:generateContent", Body: `{}`},
		{Name: "content not object", Path: "/v1beta/models/m:generateContent", Body: `{"contents":[1]}`},
		{Name: "too many candidates", Path: "/v1beta/models/m:generateContent", Body: `{"contents":[],"generationConfig":{"candidateCount":9}}`},
		{Name: "fractional cap", Path: "/v1beta/models/m:generateContent", Body: `{"contents":[],"generationConfig":{"maxOutputTokens":1.5}}`},
		{Name: "repeated cap", Path: path, Body: `{"contents":[],"generationConfig":{"maxOutputTokens":1,"maxOutputTokens":64000}}`,
			Error: `duplicate key "maxOutputTokens" in the request body at generationConfig`},
		{Name: "repeated config", Path: path, Body: `{"contents":[],"generationConfig":{"maxOutputTokens":1},"generationConfig":{}}`,
			Error: `duplicate key "generationConfig" in the request body`},
		{Name: "both config names", Path: path, Body: `{"contents":[],"generationConfig":{"maxOutputTokens":1},"generation_config":{}}`,
			Error: `"generation_config" and "generationConfig" are the same field`},
		{Name: "both cap names", Path: path, Body: `{"contents":[],"generation_config":{"max_output_tokens":1,"maxOutputTokens":64000}}`,
			Error: `"maxOutputTokens" and "max_output_tokens" are the same field`},
		{Name: "cap in another case", Path: path, Body: `{"contents":[],"generationConfig":{"MaxOutputTokens":64000}}`,
			Error: `is "maxOutputTokens" in another case`},
		{Name: "parts in another case", Path: path, Body: `{"contents":[{"Parts":[{"text":"x"}]}]}`, Error: `at contents[0] is "parts"`},
		{Name: "config an array", Path: path, Body: `{"contents":[],"generationConfig":[]}`, Error: "generationConfig must be an object"},
		{Name: "config a number", Path: path, Body: `{"contents":[],"generation_config":5}`, Error: "generationConfig must be an object"},
		{Name: "thinking config a string", Path: path, Body: `{"contents":[],"generationConfig":{"thinkingConfig":"on"}}`, Error: "thinkingConfig must be an object"},
		{Name: "fractional budget", Path: path, Body: `{"contents":[],"generationConfig":{"thinkingConfig":{"thinkingBudget":1.5}}}`, Error: "thinkingBudget must be an integer"},
		{Name: "budget below -1", Path: path, Body: `{"contents":[],"generationConfig":{"thinkingConfig":{"thinkingBudget":-2}}}`, Error: "thinkingBudget must be an integer"},
	})
}

func TestHiddenReasoning(t *testing.T) {
	tests := []struct {
		config string
		want   bool
	}{
		{`{}`, false},
		{`{"thinkingConfig":null}`, false},
		{`{"thinkingConfig":{}}`, true},
		{`{"thinkingConfig":{"includeThoughts":true}}`, true},
		{`{"thinkingConfig":{"thinkingBudget":0}}`, false},
		{`{"thinkingConfig":{"thinkingBudget":-1}}`, true},
		{`{"thinkingConfig":{"thinkingBudget":512}}`, true},
		{`{"thinking_config":{"thinking_budget":0}}`, false},
		{`{"thinking_config":{"thinking_budget":null}}`, true},
		{`{"thinkingConfig":{"thinkingLevel":"low"}}`, true},
	}
	for _, tc := range tests {
		body := `{"contents":[],"generationConfig":` + tc.config + `}`
		req, err := GenerateContent{}.ParseRequest(path, []byte(body), llmtest.ParseOptions())
		if err != nil || req.HiddenReasoning != tc.want {
			t.Errorf("%s: got hidden reasoning %v, error %v; want %v", body, req.HiddenReasoning, err, tc.want)
		}
	}
}

// path is a generateContent path.
const path = "/v1beta/models/gemini-2.5-flash:generateContent"

func TestStreamErrored(t *testing.T) {
	newReader := func() *SSEReader { return NewSSEReader("m", llmtest.ReaderOptions()) }
	llmtest.CheckErrored(t, fixtures, newReader, map[string]bool{"stream_sse_error.sse": true, "stream_sse_crlf.sse": false})
}
