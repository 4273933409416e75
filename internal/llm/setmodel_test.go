package llm_test

import (
	"errors"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/anthropic"
	"github.com/tokenwarden/tokenwarden/internal/llm/bedrock"
	"github.com/tokenwarden/tokenwarden/internal/llm/gemini"
	"github.com/tokenwarden/tokenwarden/internal/llm/openai"
)

// TestSetModel: each API names the fallback where its provider reads the
// model, and nothing else of the request changes; a path that spells
// the model's surroundings in a way the edit cannot safely replace is
// refused, never half edited.
func TestSetModel(t *testing.T) {
	tests := []struct {
		name     string
		api      llm.API
		path     string
		body     string
		model    string
		wantPath string // "" for unchanged
		wantBody string // "" for unchanged
		wantErr  bool
	}{
		{"chat", openai.Chat{}, "/v1/chat/completions",
			`{ "messages":[{"role":"user","content":"model"}], "model" : "gpt-4o",  "stream":true}`, "gpt-4o-mini",
			"", `{ "messages":[{"role":"user","content":"model"}], "model" : "gpt-4o-mini",  "stream":true}`, false},
		{"chat, the key escaped", openai.Chat{}, "/v1/chat/completions",
			`{"mod\u0065l":"gpt-4o","messages":[]}`, "gpt-4o-mini", "", `{"mod\u0065l":"gpt-4o-mini","messages":[]}`, false},
		{"completions", openai.Completions{}, "/v1/completions",
			`{"model":"gpt-3.5-turbo-instruct","prompt":"x"}`, "babbage-002", "", `{"model":"babbage-002","prompt":"x"}`, false},
		{"embeddings", openai.Embeddings{}, "/v1/embeddings",
			`{"input":"x","model":"text-embedding-3-large"}`, "text-embedding-3-small", "", `{"input":"x","model":"text-embedding-3-small"}`, false},
		{"responses", openai.Responses{}, "/v1/responses",
			`{"model":"o3","input":"x"}`, "o4-mini", "", `{"model":"o4-mini","input":"x"}`, false},
		{"anthropic", anthropic.Messages{}, "/v1/messages",
			`{"model":"claude-opus-4-1","max_tokens":10,"messages":[]}`, "claude-sonnet-4-5", "",
			`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[]}`, false},
		{"gemini", gemini.GenerateContent{}, "/v1beta/models/gemini-2.5-pro:generateContent",
			`{"contents":[]}`, "gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:generateContent", "", false},
		{"gemini stream with a query", gemini.GenerateContent{}, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
			`{"contents":[]}`, "gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "", false},
		{"gemini on vertex", gemini.GenerateContent{}, "/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-pro:generateContent",
			`{"contents":[]}`, "gemini-2.5-flash", "/v1/projects/p/locations/l/publishers/google/models/gemini-2.5-flash:generateContent", "", false},
		{"gemini, the model escaped", gemini.GenerateContent{}, "/v1beta/models/gemini%2D2.5-pro:generateContent",
			`{"contents":[]}`, "gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:generateContent", "", false},
		{"gemini, the method escaped", gemini.GenerateContent{}, "/v1beta/models/gemini-2.5-pro%3AgenerateContent",
			`{}`, "gemini-2.5-flash", "", "", true},
		{"gemini, a fallback with a method in it", gemini.GenerateContent{}, "/v1beta/models/gemini-2.5-pro:generateContent",
			`{"contents":[]}`, "tuned:generateContent", "", "", true},
		{"bedrock", bedrock.Converse{}, "/model/anthropic.claude-opus-4-1-20250805-v1:0/converse",
			`{"messages":[]}`, "anthropic.claude-3-5-haiku-20241022-v1:0", "/model/anthropic.claude-3-5-haiku-20241022-v1:0/converse", "", false},
		{"bedrock, an escaped ARN to a plain id", bedrock.Converse{}, "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.anthropic.claude-opus-4-1-20250805-v1%3A0/converse-stream",
			`{"messages":[]}`, "us.anthropic.claude-3-5-haiku-20241022-v1:0", "/model/us.anthropic.claude-3-5-haiku-20241022-v1:0/converse-stream", "", false},
		{"bedrock, to an ARN", bedrock.Converse{}, "/model/m/converse",
			`{}`, "arn:aws:bedrock:us-east-1:1:inference-profile/us.x", "/model/arn:aws:bedrock:us-east-1:1:inference-profile%2Fus.x/converse", "", false},
		{"bedrock, the method escaped", bedrock.Converse{}, "/model/m%2Fconverse", `{}`, "n", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, ok := tt.api.(llm.ModelSetter)
			if !ok {
				t.Fatalf("%s does not implement llm.ModelSetter", tt.api.Name())
			}
			if _, err := tt.api.ParseRequest(tt.path, []byte(tt.body), llm.ParseOptions{DefaultOutputCap: 10}); err != nil && !tt.wantErr {
				t.Fatalf("the case's request does not parse: %v", err)
			}
			path, body, err := ms.SetModel(tt.path, []byte(tt.body), tt.model)
			if tt.wantErr {
				if !errors.Is(err, llm.ErrModelNotSettable) {
					t.Errorf("got %q, %q, %v; want ErrModelNotSettable", path, body, err)
				}
				return
			}
			if err != nil || path != tt.wantPath || string(body) != tt.wantBody {
				t.Errorf("got path %q, body %s, err %v\nwant path %q, body %s", path, body, err, tt.wantPath, tt.wantBody)
			}
			if path == "" {
				path = tt.path
			}
			if body == nil {
				body = []byte(tt.body)
			}
			req, err := tt.api.ParseRequest(path, body, llm.ParseOptions{DefaultOutputCap: 10})
			if err != nil || req.Model != tt.model {
				t.Errorf("the edited request parses as model %q (%v), want %q", req.Model, err, tt.model)
			}
		})
	}
}
