package openai

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
	"github.com/tokenwarden/tokenwarden/extproc/llm/llmtest"
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
		err         bool
	}{
		{"string", `"abcd"`, 4, 1, false},
		{"strings", `["ab","cde"]`, 5, 2, false},
		{"token ids", `[1,2,3]`, 3, 1, false},
		{"token id batches", `[[1,2],[3]]`, 3, 2, false},
		{"empty array", `[]`, 0, 1, false},
		{"object", `{}`, 0, 0, true},
		{"nested strings", `[["a"]]`, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tokens, num, err := promptTokens(gjson.Parse(tc.json), "prompt", count)
			if (err != nil) != tc.err {
				t.Fatalf("got error %v, want error %v", err, tc.err)
			}
			if !tc.err && (tokens != tc.tokens || num != tc.num) {
				t.Errorf("got %d tokens in %d prompts, want %d in %d", tokens, num, tc.tokens, tc.num)
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
