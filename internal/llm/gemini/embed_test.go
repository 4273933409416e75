package gemini

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// TestEmbedRequests: what an embedding request reserves — its input, no
// output — and which bodies are refused.
func TestEmbedRequests(t *testing.T) {
	const embed, batch = "/v1beta/models/gemini-embedding-001:embedContent", "/v1beta/models/gemini-embedding-001:batchEmbedContents"
	tests := []struct {
		name, path, body string
		input            int64  // when accepted
		err              string // a part of the refusal
	}{
		{name: "text", path: embed, body: `{"content":{"parts":[{"text":"abcdefgh"}]}}`, input: 2 + 3},
		{name: "title counts", path: embed, body: `{"content":{"parts":[{"text":"abcd"}]},"title":"abcd"}`, input: 1 + 1 + 3},
		{name: "snake case fields", path: embed, body: `{"content":{"parts":[{"text":"abcd"}]},"task_type":"CLUSTERING","output_dimensionality":8}`, input: 1 + 3},
		{name: "vertex path", path: "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-embedding-001:embedContent",
			body: `{"content":{"parts":[{"text":"abcd"}]},"autoTruncate":true}`, input: 1 + 3},
		{name: "batch", path: batch, body: `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"abcd"}]}},` +
			`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"abcdefgh"}]},"title":"abcd"}]}`, input: 1 + 3 + 2 + 1 + 3},
		{name: "no content", path: embed, body: `{"title":"x"}`, err: "content must be an object"},
		{name: "content a string", path: embed, body: `{"content":"abcd"}`, err: "content must be an object"},
		{name: "title a number", path: embed, body: `{"content":{"parts":[]},"title":5}`, err: "title"},
		{name: "requests not an array", path: batch, body: `{"requests":{}}`, err: "requests must be an array"},
		{name: "a request not an object", path: batch, body: `{"requests":[1]}`, err: "each request must be an object"},
		{name: "a request without content", path: batch, body: `{"requests":[{"model":"m"}]}`, err: "content must be an object"},
		{name: "title twice", path: embed, body: `{"content":{"parts":[]},"title":"a","title":"b"}`, err: "title"},
		{name: "a part's text twice", path: batch, body: `{"requests":[{"content":{"parts":[{"text":"a","text":"bbbbbbbbbbbb"}]}}]}`, err: "text"},
		{name: "no model in the path", path: "/v1beta/models/:embedContent", body: `{"content":{"parts":[]}}`, err: "path does not name a model"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := EmbedContent{}.ParseRequest(tc.path, []byte(tc.body), llmtest.ParseOptions())
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error with %q", req, err, tc.err)
				}
			case err != nil:
				t.Fatalf("got error %v, want input %d", err, tc.input)
			case req.InputTokens != tc.input || req.OutputCap != 0 || req.Model != "gemini-embedding-001" || req.Stream:
				t.Errorf("got %+v, want input %d, no output cap, model gemini-embedding-001, not streamed", req, tc.input)
			case req.Estimate().OutputTokens != 0:
				t.Errorf("estimate %+v reserves output", req.Estimate())
			}
		})
	}
}

// TestMatchEmbedPath: the embedding methods, and not generateContent's.
func TestMatchEmbedPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/v1beta/models/gemini-embedding-001:embedContent":                                        true,
		"/v1beta/models/gemini-embedding-001%3AbatchEmbedContents":                                true,
		"/v1/projects/p/locations/l/publishers/google/models/text-embedding-005:embedContent?x=1": true,
		"/v1beta/models/gemini-2.5-flash:generateContent":                                         false,
		"/v1beta/models/gemini-embedding-001:asyncBatchEmbedContent":                              false,
		"/v1beta/models/gemini-embedding-001:embedText":                                           false,
	} {
		if got := MatchEmbedPath(path); got != want {
			t.Errorf("MatchEmbedPath(%q): got %v, want %v", path, got, want)
		}
	}
}

// FuzzEmbedRequest fuzzes embedding request paths and bodies (see
// llmtest.CheckRequest): no output is ever reserved.
func FuzzEmbedRequest(f *testing.F) {
	llmtest.FuzzRequestPaths(f, fixtures, llmtest.RequestTarget{API: EmbedContent{}, Path: "/v1beta/models/gemini-embedding-001:embedContent", NoOutput: true})
}
