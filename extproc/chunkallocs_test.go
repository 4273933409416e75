package extproc

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// streamedAPIs are a streamed call of each API whose response is read as
// it streams: the request, and the provider's recorded response.
var streamedAPIs = []struct {
	name, path, request, response, contentType string
	// event, when set, makes an event of the API's stream that carries
	// text (JSON-escaped already).
	event func(text string) string
}{
	{"openai chat", "/v1/chat/completions", "openai/chat_request_stream.json", "openai/chat_include_usage.sse", "text/event-stream",
		func(text string) string {
			return `data: {"choices":[{"index":0,"delta":{"content":"` + text + `"}}],"usage":null}` + "\n\n"
		}},
	{"openai responses", "/v1/responses", "openai/responses_request.json", "openai/responses_keepalive.sse", "text/event-stream",
		func(text string) string {
			return "event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","delta":"` + text + `"}` + "\n\n"
		}},
	{"anthropic messages", "/v1/messages", "anthropic/messages_request.json", "anthropic/messages_stream.sse", "text/event-stream",
		func(text string) string {
			return "event: content_block_delta\n" +
				`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + text + `"}}` + "\n\n"
		}},
	{"gemini sse", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini/generate_request.json",
		"gemini/stream_sse_cached_tools.sse", "text/event-stream",
		func(text string) string {
			return `data: {"candidates":[{"content":{"parts":[{"text":"` + text + `"}],"role":"model"},"index":0}]}` + "\r\n\r\n"
		}},
	{"gemini json array", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "gemini/generate_request.json",
		"gemini/stream_array.json", "application/json", nil},
	{"bedrock converse-stream", "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream", "bedrock/converse_request.json",
		"bedrock/converse_stream.eventstream", "application/vnd.amazon.eventstream", nil},
}

// escapedText is text with escapes, for the events of the streams.
const escapedText = `more \"text\"\n\u00e9`

// streamedCall is Envoy's side of one call of an API up to its response
// body: request headers, the buffered body, the response headers.
func streamedCall(t testing.TB, path, request, contentType string) []*extprocv3.ProcessingRequest {
	t.Helper()
	body := readFixture(t, request)
	hm := func(kv ...string) *corev3.HeaderMap {
		m := &corev3.HeaderMap{}
		for i := 0; i < len(kv); i += 2 {
			m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
		}
		return m
	}
	return []*extprocv3.ProcessingRequest{
		{
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: hm(
				":method", "POST", ":path", path, ":authority", "api.example.com", ":scheme", "https",
				"content-type", "application/json", "x-tenant-id", "t1", "x-user-id", "u1")}},
			ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: filterv3.ProcessingMode_BUFFERED,
				ResponseBodyMode: filterv3.ProcessingMode_STREAMED},
		},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}},
		{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: hm(
			":status", "200", "content-type", contentType)}}},
	}
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bodyChunks are the response body messages of b cut every n bytes, so
// that events and frames span chunks.
func bodyChunks(b []byte, n int) []*extprocv3.ProcessingRequest {
	var out []*extprocv3.ProcessingRequest
	for len(b) > 0 {
		k := min(n, len(b))
		out = append(out, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: b[:k]}}})
		b = b[k:]
	}
	return out
}

// mallocs returns how many heap allocations f makes. Like
// testing.AllocsPerRun, it runs with GOMAXPROCS at 1, so that nothing
// else allocates meanwhile.
func mallocs(f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// TestChunkAllocs: a streamed response's chunks cost nothing past their
// decoding, in every API: passing a chunk on and reading its usage
// allocates nothing, whether the chunk holds whole events, parts of
// them, or escaped text. The response is played twice in one stream: the
// first time sets the stream's readers up (and grows their buffers to
// the events' size); the second must not allocate on any chunk.
func TestChunkAllocs(t *testing.T) {
	srv := lifecycleServer(t)
	for _, api := range streamedAPIs {
		for _, size := range []int{61, 1 << 10, 64 << 10} {
			response := readFixture(t, api.response)
			if api.event != nil {
				response = append([]byte(api.event(escapedText)), response...)
			}
			st := newStream(srv, context.Background())
			for _, m := range streamedCall(t, api.path, api.request, api.contentType) {
				if resp, last := st.handle(m); resp == nil || last || resp.GetImmediateResponse() != nil {
					t.Fatalf("%s: %T: got reply %v, last %v", api.name, m.Request, resp, last)
				}
			}
			chunks := bodyChunks(response, size)
			for _, c := range chunks {
				st.handle(c)
			}
			for i, c := range chunks {
				if n := mallocs(func() { st.handle(c) }); n != 0 {
					t.Errorf("%s, %d-byte chunks: chunk %d of %d: got %d allocations, want 0", api.name, size, i, len(chunks), n)
				}
			}
			st.finish()
		}
	}
}
