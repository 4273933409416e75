package openai

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

func TestInject(t *testing.T) {
	both := llm.InjectOptions{OutputCap: true, StreamUsage: true}
	tests := []struct {
		name string
		api  llm.API
		body string
		opts llm.InjectOptions
		want map[string]string // gjson path → raw value; nil: no edit
	}{
		{"completions cap and usage", Completions{}, `{"model":"m","prompt":"p","stream":true}`, both,
			map[string]string{"max_tokens": "4096", "stream_options.include_usage": "true"}},
		{"completions keeps its cap", Completions{}, `{"model":"m","prompt":"p","max_tokens":7}`, both, nil},
		{"completions provider default", Completions{ProviderDefaultCap: true}, `{"model":"m","prompt":"p"}`, both,
			map[string]string{"max_tokens": "16"}},
		{"responses cap", Responses{}, `{"model":"m","input":"p","stream":true}`, both,
			map[string]string{"max_output_tokens": "4096"}},
		{"responses cap not asked", Responses{}, `{"model":"m","input":"p"}`, llm.InjectOptions{StreamUsage: true}, nil},
		{"embeddings never", Embeddings{}, `{"model":"m","input":"p"}`, both, nil},
		{"chat reasoning model", Chat{}, `{"model":"o3-mini","messages":[]}`, both,
			map[string]string{"max_completion_tokens": "4096"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := tc.api.ParseRequest("", []byte(tc.body), llmtest.ParseOptions())
			if err != nil {
				t.Fatal(err)
			}
			out, err := tc.api.Inject([]byte(tc.body), &req, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if out != nil {
					t.Fatalf("got edit %s, want none", out)
				}
				return
			}
			for path, v := range tc.want {
				if got := gjson.GetBytes(out, path).Raw; got != v {
					t.Errorf("got %s = %s, want %s (body %s)", path, got, v, out)
				}
			}
		})
	}
}

func TestResponsesDefaultCapAtLeast16(t *testing.T) {
	opts := llmtest.ParseOptions()
	opts.DefaultOutputCap = 8
	req, err := Responses{}.ParseRequest("", []byte(`{"model":"m","input":"x"}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if req.OutputCap != 16 {
		t.Errorf("got cap %d, want 16 (the API's minimum)", req.OutputCap)
	}
}

func TestRenderError(t *testing.T) {
	tests := []struct {
		name     string
		e        llm.Error
		wantType string
		wantCode any
	}{
		{"tokens", llm.Error{Kind: llm.RateLimited, Dimension: "tokens", Code: "rate_limit_exceeded", Message: "m"}, "tokens", "rate_limit_exceeded"},
		{"cost", llm.Error{Kind: llm.RateLimited, Dimension: "cost", Code: "rate_limit_exceeded", Message: "m"}, "cost", "rate_limit_exceeded"},
		{"unavailable", llm.Error{Kind: llm.Unavailable, Code: "limiter_unavailable", Message: "m"}, "server_error", "limiter_unavailable"},
		{"unauthenticated", llm.Error{Kind: llm.Unauthenticated, Code: "missing_identity", Message: "m"}, "invalid_request_error", "missing_identity"},
		{"bad request", llm.Error{Kind: llm.InvalidRequest, Message: "m"}, "invalid_request_error", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for name, api := range apis {
				reply := api.RenderError(tc.e)
				var got struct {
					Error struct {
						Message string
						Type    string
						Param   any
						Code    any
					}
				}
				if err := json.Unmarshal(reply.Body, &got); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if got.Error.Type != tc.wantType || got.Error.Code != tc.wantCode || got.Error.Message != "m" {
					t.Errorf("%s: got %s, want type %q code %v", name, reply.Body, tc.wantType, tc.wantCode)
				}
			}
		})
	}
}

func TestPromptTokens(t *testing.T) {
	count := func(s string) int64 { return int64(len(s)) }
	tests := []struct {
		name        string
		json        string
		tokens, num int64
		parts       string // the parts explained: "name tokens (detail)", "; "-joined
		err         bool
	}{
		{"string", `"abcd"`, 4, 1, "prompt 4", false},
		{"strings", `["ab","cde"]`, 5, 2, "prompt[0] 2; prompt[1] 3", false},
		{"token ids", `[1,2,3]`, 3, 1, "prompt 3 (token ids)", false},
		{"token id batches", `[[1,2],[3]]`, 3, 2, "prompt[0] 2 (token ids); prompt[1] 1 (token ids)", false},
		{"empty array", `[]`, 0, 1, "", false},
		{"object", `{}`, 0, 0, "", true},
		{"nested strings", `[["a"]]`, 0, 0, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var parts []string
			tally := llm.NewTally(func(p llm.Part) {
				s := fmt.Sprintf("%s %d", p.Name, p.Tokens)
				if p.Detail != "" {
					s += " (" + p.Detail + ")"
				}
				parts = append(parts, s)
			})
			num, err := promptTokens(gjson.Parse(tc.json), "prompt", &tally, count)
			tokens := tally.Done("", "")
			if (err != nil) != tc.err {
				t.Fatalf("got error %v, want error %v", err, tc.err)
			}
			if tc.err {
				return
			}
			if tokens != tc.tokens || num != tc.num {
				t.Errorf("got %d tokens in %d prompts, want %d in %d", tokens, num, tc.tokens, tc.num)
			}
			if got := strings.Join(parts, "; "); got != tc.parts {
				t.Errorf("got parts %q, want %q", got, tc.parts)
			}
		})
	}
}

func TestStreamErrors(t *testing.T) {
	newReader := func() *StreamReader { return NewStreamReader("m", llmtest.ReaderOptions(), ChatDeltaText) }
	llmtest.CheckErrored(t, fixtures, newReader, map[string]bool{
		"chat_midstream_error.sse":      true,
		"chat_vllm_error.sse":           true,
		"responses_failed.sse":          true,
		"chat_include_usage.sse":        false,
		"chat_azure_content_filter.sse": false,
	})
}

func TestParseRequestRefuses(t *testing.T) {
	const msgs = `"model":"m","messages":[]`
	tests := map[llm.API][]llmtest.BadRequest{
		Chat{}: {
			{Name: "repeated cap", Body: `{` + msgs + `,"max_tokens":1,"max_tokens":64000}`, Error: `duplicate key "max_tokens" in the request body`},
			{Name: "repeated null caps", Body: `{` + msgs + `,"max_tokens":null,"max_tokens":null}`, Error: `duplicate key "max_tokens" in the request body`},
			{Name: "repeated model", Body: `{"model":"gpt-4o-mini","messages":[],"model":"o1-pro"}`, Error: `duplicate key "model" in the request body`},
			{Name: "escaped repeated model", Body: `{"model":"gpt-4o-mini","messages":[],"m\u006fdel":"o1-pro"}`, Error: `duplicate key "model" in the request body`},
			{Name: "repeated stream_options", Body: `{` + msgs + `,"stream":true,"stream_options":{"include_usage":true},"stream_options":{"include_usage":false}}`,
				Error: `duplicate key "stream_options"`},
			{Name: "cap in capitals", Body: `{` + msgs + `,"MAX_TOKENS":64000}`, Error: `key "MAX_TOKENS" in the request body is "max_tokens" in another case`},
			{Name: "cap in mixed case", Body: `{` + msgs + `,"Max_Tokens":64000}`, Error: `key "Max_Tokens" in the request body is "max_tokens"`},
			{Name: "model capitalised", Body: `{"Model":"o1-pro","messages":[]}`, Error: `key "Model" in the request body is "model"`},
			{Name: "stream with a long s", Body: "{" + msgs + ",\"\u017ftream\":true}", Error: `is "stream" in another case`},
			{Name: "stream option in another case", Body: `{` + msgs + `,"stream":true,"stream_options":{"INCLUDE_USAGE":false}}`,
				Error: `key "INCLUDE_USAGE" in the request body at stream_options is "include_usage"`},
			{Name: "content in another case", Body: `{"model":"m","messages":[{"role":"user","Content":"x"}]}`, Error: `at messages[0] is "content"`},
			{Name: "repeated content", Body: `{"model":"m","messages":[{"role":"user","content":"x","content":"yy"}]}`, Error: `duplicate key "content" in the request body at messages[0]`},
			{Name: "stream_options a number", Body: `{` + msgs + `,"stream":true,"stream_options":5}`, Error: "stream_options must be an object"},
			{Name: "stream_options an array", Body: `{` + msgs + `,"stream_options":[]}`, Error: "stream_options must be an object"},
			{Name: "include_usage a string", Body: `{` + msgs + `,"stream_options":{"include_usage":"true"}}`, Error: "stream_options.include_usage must be a boolean"},
			{Name: "stream a string", Body: `{` + msgs + `,"stream":"true"}`, Error: "stream must be a boolean"},
			{Name: "reasoning_effort a number", Body: `{` + msgs + `,"reasoning_effort":1}`, Error: "reasoning_effort must be a string"},
			{Name: "nested too deep", Body: `{` + msgs + `,"x":` + strings.Repeat("[", llm.MaxDepth) + strings.Repeat("]", llm.MaxDepth) + `}`, Error: "levels deep"},
			{Name: "trailing garbage", Body: `{` + msgs + `}{}`, Error: "not valid JSON"},
			{Name: "no model", Body: `{"messages":[]}`, Error: "model must be a non-empty string"},
		},
		Completions{}: {
			{Name: "repeated cap", Body: `{"model":"m","prompt":"p","max_tokens":1,"max_tokens":64000}`, Error: `duplicate key "max_tokens"`},
			{Name: "best_of in capitals", Body: `{"model":"m","prompt":"p","BEST_OF":20}`, Error: `is "best_of" in another case`},
			{Name: "repeated n", Body: `{"model":"m","prompt":"p","n":1,"n":100}`, Error: `duplicate key "n"`},
			{Name: "stream_options null then object", Body: `{"model":"m","prompt":"p","stream_options":null,"stream_options":{}}`, Error: `duplicate key "stream_options"`},
		},
		Embeddings{}: {
			{Name: "repeated model", Body: `{"model":"text-embedding-3-small","input":"x","model":"text-embedding-3-large"}`, Error: `duplicate key "model"`},
			{Name: "input in another case", Body: `{"model":"m","Input":"x"}`, Error: `is "input" in another case`},
		},
		Responses{}: {
			{Name: "repeated cap", Body: `{"model":"m","input":"p","max_output_tokens":16,"max_output_tokens":64000}`, Error: `duplicate key "max_output_tokens"`},
			{Name: "background a string", Body: `{"model":"m","input":"p","background":"yes"}`, Error: "background must be a boolean"},
			{Name: "background in another case", Body: `{"model":"m","input":"p","Background":true}`, Error: `is "background" in another case`},
			{Name: "reasoning a number", Body: `{"model":"m","input":"p","reasoning":5}`, Error: "reasoning must be an object"},
			{Name: "effort a number", Body: `{"model":"m","input":"p","reasoning":{"effort":1}}`, Error: "reasoning.effort must be a string"},
			{Name: "item content in another case", Body: `{"model":"m","input":[{"role":"user","CONTENT":"x"}]}`, Error: `at input[0] is "content"`},
		},
	}
	for api, bad := range tests {
		t.Run(api.Name(), func(t *testing.T) { llmtest.CheckRefused(t, api, bad) })
	}
}

// TestInjectEdits: each edit changes the one occurrence of its field,
// whatever the body holds there, and encoding/json reads the result as
// the reservation assumed.
func TestInjectEdits(t *testing.T) {
	both := llm.InjectOptions{OutputCap: true, StreamUsage: true}
	tests := []struct {
		name string
		api  llm.API
		body string
		want string
	}{
		{"stream_options null", Chat{}, `{"model":"m","messages":[],"stream":true,"stream_options":null,"max_tokens":5}`,
			`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true},"max_tokens":5}`},
		{"include_usage false", Chat{}, `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":false},"max_tokens":5}`,
			`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true},"max_tokens":5}`},
		{"include_usage null", Completions{}, `{"model":"m","prompt":"p","stream":true,"stream_options":{"include_usage":null},"max_tokens":5}`,
			`{"model":"m","prompt":"p","stream":true,"stream_options":{"include_usage":true},"max_tokens":5}`},
		{"null cap", Chat{}, `{"model":"m","messages":[],"max_tokens":null}`,
			`{"model":"m","messages":[],"max_tokens":4096}`},
		{"escaped null cap", Chat{}, `{"model":"m","messages":[],"max_t\u006fkens":null}`,
			`{"model":"m","messages":[],"max_t\u006fkens":4096}`},
		{"reasoning model beside a null max_tokens", Chat{}, `{"model":"o3","messages":[],"max_tokens":null}`,
			`{"model":"o3","messages":[],"max_tokens":null,"max_completion_tokens":4096}`},
		{"null responses cap", Responses{}, `{"model":"m","input":"p","max_output_tokens":null}`,
			`{"model":"m","input":"p","max_output_tokens":4096}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := tc.api.ParseRequest("", []byte(tc.body), llmtest.ParseOptions())
			if err != nil {
				t.Fatal(err)
			}
			out, err := tc.api.Inject([]byte(tc.body), &req, both)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got  %s\nwant %s", out, tc.want)
			}
		})
	}
}

// TestPathModel: with ParseOptions.Model (an Azure deployment's model),
// the body's model is neither required nor read, but a repeated one is
// still refused.
func TestPathModel(t *testing.T) {
	bodies := map[llm.API]string{
		Chat{}:        `"messages":[{"role":"user","content":"hi"}]`,
		Completions{}: `"prompt":"hi"`,
		Embeddings{}:  `"input":"hi"`,
		Responses{}:   `"input":"hi"`,
	}
	opts := llmtest.ParseOptions()
	opts.Model = "gpt-4o"
	for api, rest := range bodies {
		t.Run(api.Name(), func(t *testing.T) {
			for _, body := range []string{`{` + rest + `}`, `{"model":"o1-pro",` + rest + `}`, `{"model":5,` + rest + `}`} {
				req, err := api.ParseRequest("/openai/deployments/d/x", []byte(body), opts)
				if err != nil || req.Model != "gpt-4o" {
					t.Errorf("%s: got model %q, error %v; want gpt-4o", body, req.Model, err)
				}
			}
			body := `{"model":"a","model":"b",` + rest + `}`
			if _, err := api.ParseRequest("/openai/deployments/d/x", []byte(body), opts); err == nil {
				t.Errorf("%s: got no error for a repeated model", body)
			}
		})
	}
}

func TestReasoningAndBackground(t *testing.T) {
	tests := []struct {
		api        llm.API
		body       string
		hidden, bg bool
	}{
		{Chat{}, `{"model":"m","messages":[]}`, false, false},
		{Chat{}, `{"model":"m","messages":[],"reasoning_effort":"low"}`, true, false},
		{Chat{}, `{"model":"m","messages":[],"reasoning_effort":"minimal"}`, true, false},
		{Chat{}, `{"model":"m","messages":[],"reasoning_effort":"none"}`, false, false},
		{Chat{}, `{"model":"m","messages":[],"reasoning_effort":null}`, false, false},
		{Responses{}, `{"model":"m","input":"p"}`, false, false},
		{Responses{}, `{"model":"m","input":"p","reasoning":{"effort":"high"}}`, true, false},
		{Responses{}, `{"model":"m","input":"p","reasoning":{}}`, true, false},
		{Responses{}, `{"model":"m","input":"p","reasoning":{"effort":"none"}}`, false, false},
		{Responses{}, `{"model":"m","input":"p","reasoning":null}`, false, false},
		{Responses{}, `{"model":"m","input":"p","background":true}`, false, true},
		{Responses{}, `{"model":"m","input":"p","background":false}`, false, false},
		{Responses{}, `{"model":"m","input":"p","background":null}`, false, false},
	}
	for _, tc := range tests {
		req, err := tc.api.ParseRequest("", []byte(tc.body), llmtest.ParseOptions())
		if err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		if req.HiddenReasoning != tc.hidden || req.Background != tc.bg {
			t.Errorf("%s: got hidden reasoning %v, background %v; want %v, %v", tc.body, req.HiddenReasoning, req.Background, tc.hidden, tc.bg)
		}
	}
}
