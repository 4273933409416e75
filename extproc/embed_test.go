package extproc_test

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// TestGeminiEmbeddingsAreMetered: embedContent and batchEmbedContents are
// reserved on their input estimate before they reach Gemini, with their
// bodies as sent, and settle on Vertex AI's usageMetadata, or on the
// estimate where the Gemini API reports none. Before, they passed
// unmetered.
func TestGeminiEmbeddingsAreMetered(t *testing.T) {
	tests := []struct {
		name, path, fixture, reply string
		wantUsed                   int64 // after settlement
	}{
		// The fixtures' estimates are 32 tokens at four characters a
		// token; the server's approximate tokenizer counts its own.
		{"embedContent, no usage", "/v1beta/models/gemini-embedding-001:embedContent", "gemini/embed_request.json", "gemini/embed.json", -1},
		{"batchEmbedContents, no usage", "/v1beta/models/gemini-embedding-001:batchEmbedContents", "gemini/batch_embed_request.json", "gemini/batch_embed.json", -1},
		{"Vertex AI, usageMetadata", "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-embedding-001:embedContent",
			"gemini/embed_request.json", "gemini/embed_vertex.json", 21},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("tpm", 1_000_000, "tenant")})
			a := accounting.Attributes{{Name: "tenant", Value: "a"}}
			body := fixture(t, tc.fixture)
			var reserved int64
			resp := r.envoy.Do(t.Context(), envoytest.Request{Path: tc.path,
				Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", "a"}}, Body: body},
				func(up *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
					reserved = r.used(t, "tpm", a)
					if string(up.Body) != string(body) {
						t.Errorf("upstream body: got %s, want the request's", up.Body)
					}
					return jsonUpstream(200, fixture(t, tc.reply))(up)
				})
			wantStatus(t, resp, 200)
			if reserved <= 0 {
				t.Fatalf("reserved %d tokens before the upstream, want the input estimate", reserved)
			}
			want := tc.wantUsed
			if want < 0 {
				want = reserved // the estimate: no output was reserved
			}
			if got := r.used(t, "tpm", a); got != want {
				t.Errorf("settled: got %d tokens, want %d (reserved %d)", got, want, reserved)
			}
			if md := resp.Metadata["tokenwarden"]; md["api"] != "gemini.embed_content" || md["model"] != "gemini-embedding-001" {
				t.Errorf("metadata: got %v, want api gemini.embed_content, model gemini-embedding-001", md)
			}
		})
	}
}
