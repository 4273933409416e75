package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// writeFile writes data to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// estimateConfig is a config that changes every setting the estimate
// depends on from its default.
const estimateConfig = `
estimation:
  default_output_cap: 777
  tokenizer: approximate
  chars_per_token: 2
  per_model: [{pattern: "gpt-4.1*", tokenizer: exact}]
models:
  gpt-4o:  {input: 2.50, output: 10.00}
  default: {input: 1.00, output: 2.00}
azure:
  deployments: {prod: gpt-4o}
settlement:
  background: refuse
  hidden_reasoning_models: []
other_paths: count
`

func TestRunEstimate(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "tw.yaml", estimateConfig)
	bodyFile := writeFile(t, dir, "body.json", `{"model":"gpt-4o","messages":[{"role":"user","content":"From a file."}]}`)
	fixture := func(name string) string { return filepath.Join("..", "..", "testdata", name) }
	// Text is counted by the embedded config's tokenizer.
	tw, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	counter, err := tokenizer.New(tw.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	count := counter.CountTokens
	sys, usr := count("gpt-4o", "You are terse."), count("gpt-4o", "Hi there")
	chatIn := sys + usr + 2*4 + 3
	tests := []struct {
		name    string
		args    []string
		body    string
		want    []string
		wantErr string
	}{
		{
			name: "chat: parts, cap × n, cost from the embedded config's prices",
			body: `{"model":"gpt-4o","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi there"}],"max_completion_tokens":100,"n":2}`,
			want: []string{
				"api openai.chat, model gpt-4o, tokenizer approximate (o200k table, ×1.00)",
				fmt.Sprintf("messages[0] system text %d", sys), fmt.Sprintf("messages[1] user text %d", usr),
				"chat format overhead 11 3 a message, 1 a role, 1 a name, 3 to prime the reply",
				fmt.Sprintf("input total %d", chatIn),
				"output cap: 100 (max_completion_tokens) × 2 choices = 200",
				fmt.Sprintf("reservation: %d tokens", chatIn+200),
				fmt.Sprintf("cost: %d × $2.50/M + 200 × $10.00/M = $%.6f (models.gpt-4o)", chatIn, math.Ceil(float64(chatIn)*2.5+2000)/1e6), // whole micro-dollars, up
			},
		},
		{
			name: "the server's defaults and notes",
			args: []string{"-path", "/v1/responses"},
			body: `{"model":"o3","instructions":"Be brief.","input":"Go on.","previous_response_id":"resp_1"}`,
			want: []string{
				"api openai.responses, model o3",
				"output cap: 4096 (default_output_cap, added to the body) × 1 choice = 4096",
				"(models.default)",
				"note: previous_response_id: the earlier conversation is billed as input but not counted",
				"note: the model reasons without streaming all of it",
			},
		},
		{
			name: "images, sized and not",
			body: `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + llmtest.PNGDataURL(t, 640, 480) +
				`"}},{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"high"}}]}]}`,
			want: []string{"messages[0] user image_url 425 detail auto, 640×480", "messages[0] user image_url 1445 detail high, size unknown"},
		},
		{
			name: "the config's settings",
			args: []string{"-config", cfg, "-path", "/openai/deployments/prod/chat/completions?api-version=2024-10-21"},
			body: `{"messages":[{"role":"user","content":"hello world"}]}`,
			want: []string{
				"model gpt-4o (the Azure deployment's), tokenizer approximate (o200k table, ×2.00)",
				"output cap: 777 (default_output_cap, added to the body) × 1 choice = 777",
				"(models.gpt-4o)",
			},
		},
		{
			name: "the config's per-model tokenizer",
			args: []string{"-config", cfg},
			body: `{"model":"gpt-4.1","messages":[{"role":"user","content":"hello world"}]}`,
			want: []string{"tokenizer exact (o200k_base", "messages[0] user text 2", "(models.default)"},
		},
		{
			name: "gemini: the model is in the path",
			args: []string{"-path", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"},
			body: `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}],"generationConfig":{"maxOutputTokens":64,"candidateCount":2}}`,
			want: []string{"api gemini.generate_content, streamed, model gemini-2.5-flash", fmt.Sprintf("contents[0] user text %d", count("gemini-2.5-flash", "Hi")),
				"output cap: 64 (generationConfig.maxOutputTokens) × 2 choices = 128"},
		},
		{
			name: "bedrock: an ARN in the path",
			args: []string{"-path", "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.anthropic.claude-sonnet-4-20250514-v1%3A0/converse", fixture("bedrock/converse_request.json")},
			want: []string{"model arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0",
				"tool prompt 346 the system prompt Anthropic adds when tools are offered", "output cap: 2000 (inferenceConfig.maxTokens)"},
		},
		{
			name: "completions: the default cap for every choice of every prompt",
			args: []string{"-path", "/v1/completions", fixture("openai/completions_request.json")},
			want: []string{"output cap: 4096 (default_output_cap, added to the body) × 6 choices = 24576",
				"note: max_tokens absent: OpenAI defaults to 16, the estimate uses default_output_cap"},
		},
		{
			name: "embeddings: no output",
			args: []string{"-path", "/v1/embeddings"},
			body: `{"model":"text-embedding-3-small","input":[[1,2,3],"text"]}`,
			want: []string{"input[0] 3 token ids", "output: none", fmt.Sprintf("reservation: %d tokens", 3+count("text-embedding-3-small", "text"))},
		},
		{
			name: "not an LLM API path",
			args: []string{"-path", "/v1/messages/count_tokens", fixture("anthropic/messages_request.json")},
			want: []string{"/v1/messages/count_tokens is not an LLM API path: the server passes the request untouched and counts it nowhere"},
		},
		{
			name: "not an LLM API path, counted",
			args: []string{"-config", cfg, "-path", "/v1/messages/count_tokens", fixture("anthropic/messages_request.json")},
			want: []string{"/v1/messages/count_tokens is not an LLM API path: the server reads no body and counts the request on the requests dimension only"},
		},
		{
			name:    "an unmetered API",
			args:    []string{"-path", "/v1/batches"},
			body:    `{"input_file_id":"file-1","endpoint":"/v1/chat/completions","completion_window":"24h"}`,
			wantErr: "estimate: the server answers 403 This proxy meters what each call spends, and cannot meter openai.batches calls",
		},
		{
			name: "no body",
			want: []string{"api openai.chat: a request without a body is counted on the requests dimension only"},
		},
		{name: "a file", args: []string{bodyFile}, want: []string{fmt.Sprintf("messages[0] user text %d", count("gpt-4o", "From a file."))}},
		{name: "stdin as -", args: []string{"-"}, body: `{"model":"gpt-4o","messages":[]}`, want: []string{"input total 3"}},
		{name: "not JSON", body: `{"model":`, wantErr: "estimate: the server answers 400 Invalid request: "},
		{name: "a key twice", body: `{"model":"gpt-4o","messages":[],"max_tokens":1,"max_tokens":9}`, wantErr: `400 Invalid request: duplicate key "max_tokens"`},
		{name: "a model name past the bound", body: `{"model":"` + strings.Repeat("m", extproc.MaxAttributeBytes+1) + `","messages":[]}`,
			wantErr: "400 Invalid request: the model name is longer than 1024 bytes"},
		{name: "no model", body: `{"messages":[]}`, wantErr: "400 Invalid request: model must be a non-empty string"},
		{name: "refused by the config", args: []string{"-config", cfg, "-path", "/v1/responses"}, body: `{"model":"gpt-4o","input":"x","background":true}`,
			wantErr: "400 Invalid request: background responses are not allowed here"},
		{name: "a flag that is gone", args: []string{"-model", "gpt-4o"}, body: `{}`, wantErr: "flag provided but not defined: -model"},
		{name: "two files", args: []string{"a", "b"}, wantErr: "one body at a time"},
		{name: "missing file", args: []string{filepath.Join(dir, "nope.json")}, wantErr: "no such file"},
		{name: "missing config", args: []string{"-config", filepath.Join(dir, "nope.yaml")}, body: `{}`, wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runEstimate(context.Background(), tt.args, strings.NewReader(tt.body), &out, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("runEstimate: got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("runEstimate: %v", err)
			}
			got := strings.Join(strings.Fields(out.String()), " ") // spacing is layout
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q; got:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestEstimateIsTheServers runs "tokenwarden estimate" as a user does,
// through run, and requires the figures the server's own Explain gives
// for the same body and path: the CLI only presents them.
func TestEstimateIsTheServers(t *testing.T) {
	tw, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	counter, err := tokenizer.New(tw.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := estimateServer(tw, counter)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, file string }{
		{"/v1/chat/completions", "openai/chat_request.json"},
		{"/v1/completions", "openai/completions_request.json"},
		{"/v1/messages", "anthropic/messages_request_blocks.json"},
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "gemini/stream_request_snake.json"},
		{"/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse", "bedrock/converse_request.json"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			name := filepath.Join("..", "..", "testdata", tc.file)
			body, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			e, err := srv.Explain(tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if err := run(t.Context(), []string{"estimate", "-path", tc.path, name}, nil, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(strings.Fields(out.String()), " ")
			want := []string{fmt.Sprintf("api %s", e.API), fmt.Sprintf("model %s", e.Model),
				fmt.Sprintf("input total %d", e.InputTokens), fmt.Sprintf("reservation: %d tokens", e.Estimate.Total())}
			for _, p := range e.Parts {
				want = append(want, strings.TrimSpace(fmt.Sprintf("%s %d %s", p.Name, p.Tokens, p.Detail)))
			}
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q; got:\n%s", w, out.String())
				}
			}
		})
	}
}

// FuzzEstimate feeds the estimate any body on every API's path: it never
// fails but with the server's refusal, and what it prints adds up.
func FuzzEstimate(f *testing.F) {
	paths := []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages",
		"/v1beta/models/gemini-2.5-pro:generateContent", "/model/anthropic.m/converse", "/v1/messages/count_tokens", "/v1/batches"}
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "*", "*request*.json"))
	for i, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(i))
	}
	f.Add([]byte(`{"model":"x","messages":[{"role":"a\u0000\nb","content":[{"type":"\u202e","text":"y"}]}]}`), uint8(0))
	tw, err := loadConfig("")
	if err != nil {
		f.Fatal(err)
	}
	counter, err := tokenizer.New(tw.Tokenizer)
	if err != nil {
		f.Fatal(err)
	}
	srv, err := estimateServer(tw, counter)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, p uint8) {
		path := paths[int(p)%len(paths)]
		e, err := srv.Explain(path, body)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "400 ") && !strings.HasPrefix(err.Error(), "403 ") {
				t.Fatalf("not the server's refusal: %v", err)
			}
			return
		}
		var out bytes.Buffer
		printExplanation(&out, path, e, counter, accounting.Prices{"default": {Input: 1, Output: 2}})
		if !e.Metered {
			return
		}
		var sum int64
		for _, part := range e.Parts {
			if strings.ContainsAny(part.Name, "\n\r") {
				t.Fatalf("a part's name breaks the table: %q", part.Name)
			}
			sum += part.Tokens
		}
		if sum != e.InputTokens || !strings.Contains(out.String(), fmt.Sprintf("reservation: %d tokens", e.Estimate.Total())) {
			t.Fatalf("parts sum to %d, input %d; printed:\n%s", sum, e.InputTokens, out.String())
		}
	})
}

// TestEstimateInDocs: the example in docs/estimates.md is what the
// command prints.
func TestEstimateInDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "estimates.md"))
	if err != nil {
		t.Fatal(err)
	}
	const command = "$ tokenwarden estimate testdata/openai/chat_request.json\n"
	_, example, ok := strings.Cut(string(doc), command)
	if !ok {
		t.Fatalf("docs/estimates.md has no example starting %q", command)
	}
	example, _, _ = strings.Cut(example, "```")
	var out strings.Builder
	if err := run(t.Context(), []string{"estimate", filepath.Join("..", "..", "testdata", "openai", "chat_request.json")}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if out.String() != example {
		t.Errorf("the command prints\n%s\ndocs/estimates.md says\n%s", out.String(), example)
	}
}
