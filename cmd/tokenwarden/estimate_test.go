package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

// pngDataURL returns a data URL of a blank w×h PNG.
func pngDataURL(t testing.TB, w, h int) string {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

func TestRunEstimate(t *testing.T) {
	approx, err := tokenizer.New(tokenizer.Config{})
	if err != nil {
		t.Fatal(err)
	}
	count := func(model string, ss ...string) int64 {
		var n int64
		for _, s := range ss {
			n += approx.CountTokens(model, s)
		}
		return n
	}
	dir := t.TempDir()
	bodyFile := filepath.Join(dir, "body.json")
	if err := os.WriteFile(bodyFile, []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"From a file."}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	chatIn := count("gpt-4o", "You are terse.", "Hi there") + 2*4 + 3
	tests := []struct {
		name    string
		args    []string
		body    string
		want    []string
		wantErr string
	}{
		{
			name: "chat: parts, cap × n, cost",
			args: []string{"-price-input", "2.5", "-price-output", "10"},
			body: `{"model":"gpt-4o","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi there"}],"max_completion_tokens":100,"n":2}`,
			want: []string{
				"api openai.chat, model gpt-4o, tokenizer approximate (o200k table, ×1.00)",
				"messages[0] system text", "chat format 11 2 messages × 4, reply priming 3",
				fmt.Sprintf("input total %d", chatIn),
				"output cap: 100 (max_completion_tokens) × 2 choices = 200",
				fmt.Sprintf("reservation: %d tokens", chatIn+200),
				fmt.Sprintf("cost: %d × $2.50/M + 200 × $10.00/M = $%.6f", chatIn, math.Ceil(float64(chatIn)*2.5+2000)/1e6), // whole micro-dollars, up
			},
		},
		{
			name: "images: sized from a data URL, unsized URL at worst case",
			body: `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + pngDataURL(t, 640, 480) + `"}},{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"high"}},{"type":"image_url","image_url":{"url":"https://example.com/b.png","detail":"low"}}]}]}`,
			want: []string{"messages[0] user image_url 425 detail auto, 640×480", "1445 detail high, unsized", "85 detail low"},
		},
		{
			name: "no cap: the default",
			args: []string{"-default-output-cap", "1000", "-model", "claude-sonnet-4-5"},
			body: `{"messages":[{"role":"user","content":"hello"}]}`,
			want: []string{"model claude-sonnet-4-5, tokenizer approximate (generic table, ×1.00)", "output cap: 1000 (default) × 1 choices = 1000"},
		},
		{
			name: "exact tokenizer",
			args: []string{"-tokenizer", "exact"},
			body: `{"model":"gpt-4.1","messages":[{"role":"user","content":"hello world"}]}`,
			want: []string{"tokenizer exact (o200k_base", "messages[0] user text 2 chat format 7"},
		},
		{
			name: "responses: history is noted",
			args: []string{"-path", "/v1/responses"},
			body: `{"model":"o3","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"Go on."}]}],"previous_response_id":"resp_1","max_output_tokens":500}`,
			want: []string{"instructions", "input[0] user input_text", "output cap: 500 (max_output_tokens)", "note: previous_response_id"},
		},
		{
			name: "anthropic messages",
			args: []string{"-path", "/v1/messages"},
			body: `{"model":"claude-haiku-4-5","system":"Terse.","messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}],"tools":[{"name":"f","input_schema":{}}],"max_tokens":300}`,
			want: []string{"system", "messages[0] user text", "tools", "1 definition", "output cap: 300 (max_tokens)"},
		},
		{
			name: "gemini: the model is in the path",
			args: []string{"-path", "/v1beta/models/gemini-2.5-flash:generateContent"},
			body: `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}],"generationConfig":{"maxOutputTokens":64,"candidateCount":2}}`,
			want: []string{"model gemini-2.5-flash", "contents[0] user text", "output cap: 64 (generationConfig.maxOutputTokens) × 2 choices = 128"},
		},
		{
			name: "bedrock converse",
			args: []string{"-path", "/model/anthropic.claude-3-haiku/converse"},
			body: `{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"inferenceConfig":{"maxTokens":50}}`,
			want: []string{"model anthropic.claude-3-haiku", "output cap: 50 (inferenceConfig.maxTokens)"},
		},
		{
			name: "completions: legacy default cap and best_of",
			args: []string{"-path", "/v1/completions"},
			body: `{"model":"gpt-3.5-turbo-instruct","prompt":["a","b"],"best_of":3}`,
			want: []string{"prompt[1]", "output cap: 16 (max_tokens (API default)) × 3 choices = 48", "cl100k table"},
		},
		{
			name: "embeddings: no output",
			args: []string{"-path", "/v1/embeddings"},
			body: `{"model":"text-embedding-3-small","input":[[1,2,3],"text"]}`,
			want: []string{"input[0] 3 token ids", "output: none (embeddings)"},
		},
		{
			name: "a file instead of stdin",
			args: []string{bodyFile},
			want: []string{"messages[0] user text"},
		},
		{name: "not JSON", body: `{"model":`, wantErr: "not valid JSON"},
		{name: "not an object", body: `[1]`, wantErr: "not a JSON object"},
		{name: "unknown path", args: []string{"-path", "/v1/images"}, body: `{}`, wantErr: "not an API path"},
		{name: "no model", body: `{"messages":[]}`, wantErr: "pass -model"},
		{name: "bad tokenizer", args: []string{"-tokenizer", "fancy"}, body: `{}`, wantErr: "tokenizer: \"fancy\""},
		{name: "two files", args: []string{"a", "b"}, wantErr: "one body at a time"},
		{name: "missing file", args: []string{filepath.Join(dir, "nope.json")}, wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runEstimate(context.Background(), tt.args, strings.NewReader(tt.body), &out, &errOut)
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
					t.Errorf("output lacks %q; got:\n%s", w, got)
				}
			}
		})
	}
}

// FuzzEstimateRequest feeds the breakdown any body on every API: it never
// panics, and a breakdown adds up.
func FuzzEstimateRequest(f *testing.F) {
	paths := []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages",
		"/v1beta/models/gemini-2.5-pro:generateContent", "/model/m/converse"}
	for _, s := range []string{
		`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`,
		`{"model":"x","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},{"type":"file","file":{"file_data":"JVBERi0="}}]}]}`,
		`{"model":"x","input":[{"type":"message","content":[{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0="}]}]}`,
		`{"model":"x","prompt":[[1,2],[3]],"n":1e309}`,
		`{"contents":[{"parts":[{"inlineData":{"mimeType":"audio/wav","data":"!!"}}]}]}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	counter, err := tokenizer.New(tokenizer.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, p uint8) {
		est, err := estimateRequest(paths[int(p)%len(paths)], body, "", counter, 4096)
		if err != nil {
			return
		}
		var sum int64
		for _, part := range est.Parts {
			if part.Tokens < 0 {
				t.Fatalf("part %q: %d tokens", part.Name, part.Tokens)
			}
			sum += part.Tokens
		}
		if sum != est.Input || est.Output < 0 || est.Output > 128*(1<<31) {
			t.Fatalf("input %d (parts sum %d), output %d", est.Input, sum, est.Output)
		}
		printEstimate(&bytes.Buffer{}, est, counter, accounting.Price{Input: 1, Output: 2})
	})
}

// TestEstimateWithConfig takes the server's own settings: the configured
// default output cap and the model's price from the models table.
func TestEstimateWithConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tw.yaml")
	body := filepath.Join(dir, "body.json")
	if err := os.WriteFile(cfg, []byte("estimation: {default_output_cap: 777}\nmodels: {gpt-4o-mini: {input: 1000000, output: 0}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(body, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := run(t.Context(), []string{"estimate", "-config", cfg, body}, strings.NewReader(""), &out, io.Discard); err != nil {
		t.Fatalf("estimate -config: %v", err)
	}
	if !strings.Contains(out.String(), "777") {
		t.Errorf("the configured default output cap 777 is not in the output:\n%s", out.String())
	}
	if strings.Contains(out.String(), "$0.000000") {
		t.Errorf("the model's configured price was not used:\n%s", out.String())
	}
	if err := run(t.Context(), []string{"estimate", "-config", filepath.Join(dir, "missing.yaml"), body}, nil, io.Discard, io.Discard); err == nil {
		t.Errorf("a missing config file was accepted")
	}
}
