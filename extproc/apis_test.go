package extproc_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// apiCase is one API end to end through the test Envoy: a request
// fixture, the provider's response fixture and the usage it reports.
type apiCase struct {
	name        string
	path        string
	request     string
	response    string
	contentType string
	wantTokens  int64
	// errorShape checks a 429 body and headers in the API's shape.
	errorShape func(t *testing.T, resp *envoytest.Response)
}

func jsonBody(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, b)
	}
	return m
}

var apiCases = []apiCase{
	{
		name: "openai responses", path: "/v1/responses", request: "openai/responses_request.json",
		response: "openai/responses_keepalive.sse", contentType: "text/event-stream", wantTokens: 123,
		errorShape: openaiShape,
	},
	{
		name: "openai completions", path: "/v1/completions", request: "openai/completions_request.json",
		response: "openai/completions_stream.sse", contentType: "text/event-stream", wantTokens: 11,
		errorShape: openaiShape,
	},
	{
		name: "openai embeddings", path: "/v1/embeddings", request: "openai/embeddings_request.json",
		response: "openai/embeddings.json", contentType: "application/json", wantTokens: 96,
		errorShape: openaiShape,
	},
	{
		name: "anthropic messages", path: "/v1/messages", request: "anthropic/messages_request.json",
		response: "anthropic/messages_stream.sse", contentType: "text/event-stream", wantTokens: 3559,
		errorShape: func(t *testing.T, resp *envoytest.Response) {
			m := jsonBody(t, resp.Body)
			e, _ := m["error"].(map[string]any)
			if m["type"] != "error" || e["type"] != "rate_limit_error" || !strings.Contains(e["message"].(string), "api-tokens") {
				t.Errorf("Anthropic 429 body: got %s", resp.Body)
			}
		},
	},
	{
		name: "gemini", path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", request: "gemini/generate_request.json",
		response: "gemini/stream_sse_crlf.sse", contentType: "text/event-stream", wantTokens: 41,
		errorShape: func(t *testing.T, resp *envoytest.Response) {
			e, _ := jsonBody(t, resp.Body)["error"].(map[string]any)
			if e["code"] != 429.0 || e["status"] != "RESOURCE_EXHAUSTED" {
				t.Errorf("Gemini 429 body: got %s", resp.Body)
			}
		},
	},
	{
		name: "bedrock converse-stream", path: "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream", request: "bedrock/converse_request.json",
		response: "bedrock/converse_stream.eventstream", contentType: "application/vnd.amazon.eventstream", wantTokens: 156,
		errorShape: func(t *testing.T, resp *envoytest.Response) {
			if _, ok := jsonBody(t, resp.Body)["message"].(string); !ok {
				t.Errorf("Bedrock 429 body: got %s", resp.Body)
			}
			wantHeader(t, resp.Header, "x-amzn-errortype", "ThrottlingException")
		},
	},
}

func openaiShape(t *testing.T, resp *envoytest.Response) {
	e := decodeError(t, resp.Body)
	if e.Error.Type != "tokens" || e.Error.Code != "rate_limit_exceeded" {
		t.Errorf("OpenAI 429 body: got %s", resp.Body)
	}
}

// chunked splits b into chunks of n bytes, as Envoy's data callbacks may.
func chunked(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		k := min(n, len(b))
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}

func TestEveryAPIEndToEnd(t *testing.T) {
	for _, tc := range apiCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("api-tokens", 1_000_000, "tenant")})
			req := envoytest.Request{Path: tc.path, Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", "a"}},
				Body: fixture(t, tc.request)}
			body := fixture(t, tc.response)
			resp := r.envoy.Do(t.Context(), req, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", tc.contentType}}, Chunks: chunked(body, 97)}
			})
			wantStatus(t, resp, 200)
			if !bytes.Equal(resp.Body, body) {
				t.Errorf("the response was altered on its way to the client")
			}
			if got := r.used(t, "api-tokens", tenantA); got != tc.wantTokens {
				t.Errorf("settled tokens: got %d, want the fixture's usage %d", got, tc.wantTokens)
			}
		})
		t.Run(tc.name+" 429", func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("api-tokens", 1, "tenant")})
			req := envoytest.Request{Path: tc.path, Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", "a"}},
				Body: fixture(t, tc.request)}
			resp := r.envoy.Do(t.Context(), req, nil)
			wantStatus(t, resp, 429)
			wantHeader(t, resp.Header, "content-type", "application/json")
			wantHeader(t, resp.Header, "x-tokenwarden-limit", "api-tokens")
			tc.errorShape(t, resp)
		})
	}
}

// TestCompressedResponses settles from a gzip and a zstd response: the
// client receives the compressed bytes untouched, and the usage is read
// from the decoded stream.
func TestCompressedResponses(t *testing.T) {
	plain := fixture(t, "openai/chat_stream_usage.sse")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	enc, _ := zstd.NewWriter(nil)
	zs := enc.EncodeAll(plain, nil)
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"Summarise TS 23.501."}]}`)
	for _, tc := range []struct {
		encoding string
		data     []byte
		want     int64
	}{
		{"gzip", gz.Bytes(), 224},
		{"zstd", zs, 224},
		{"compress", gz.Bytes(), 0}, // unknown: the reservation stands
	} {
		t.Run(tc.encoding, func(t *testing.T) {
			r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")})
			resp := r.envoy.Do(t.Context(), chatRequest("a", body), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
				return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "text/event-stream"}, {"content-encoding", tc.encoding}},
					Chunks: chunked(tc.data, 13)}
			})
			wantStatus(t, resp, 200)
			if !bytes.Equal(resp.Body, tc.data) {
				t.Errorf("compressed bytes were altered")
			}
			used := r.used(t, "tenant-tokens", tenantA)
			if tc.want != 0 && used != tc.want {
				t.Errorf("settled: got %d, want %d", used, tc.want)
			}
			if tc.want == 0 && used < 500 {
				t.Errorf("settled %d for an unreadable response, want the whole reservation (> 500)", used)
			}
		})
	}
}
