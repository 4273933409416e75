package openai

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

// benchReader measures a reader over body fed in 16 KiB chunks, as Envoy
// hands a streamed body over. allocs/op is per body: a reader's own
// setup, not per event.
func benchReader(b *testing.B, api llm.API, contentType string, body []byte) {
	req := &llm.Request{Model: "gpt-4o-mini"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := api.NewUsageReader(req, contentType, readerOpts())
		for i := 0; i < len(body); i += 16 << 10 {
			r.Write(body[i:min(i+16<<10, len(body))])
		}
		if _, ok := r.Usage(); !ok {
			b.Fatal("no usage")
		}
	}
}

func BenchmarkUsage(b *testing.B) {
	b.Run("chat_stream", func(b *testing.B) {
		benchReader(b, Chat{}, "text/event-stream", bytes.Repeat(readFixture(b, "chat_include_usage.sse"), 100))
	})
	b.Run("responses_stream", func(b *testing.B) {
		benchReader(b, Responses{}, "text/event-stream", bytes.Repeat(readFixture(b, "responses_keepalive.sse"), 100))
	})
	b.Run("chat_json", func(b *testing.B) {
		benchReader(b, Chat{}, "application/json", readFixture(b, "chat_cached.json"))
	})
	b.Run("embeddings_json", func(b *testing.B) {
		benchReader(b, Embeddings{}, "application/json", readFixture(b, "embeddings.json"))
	})
}

// TestStreamAllocsPerEvent: the stream reader allocates nothing per event
// once it is set up. (A text with JSON escapes costs one allocation:
// gjson unescapes string values as it parses them; the fixtures here have
// none.)
func TestStreamAllocsPerEvent(t *testing.T) {
	one := readFixture(t, "chat_azure_content_filter.sse")
	r := Chat{}.NewUsageReader(&llm.Request{Model: "m"}, "text/event-stream", readerOpts())
	r.Write(one) // warm up buffers
	if n := testing.AllocsPerRun(20, func() { r.Write(one) }); n > 0 {
		t.Errorf("got %.1f allocations per %d-event body, want 0", n, bytes.Count(one, []byte("data:")))
	}
	one = readFixture(t, "responses_keepalive.sse")
	r = Responses{}.NewUsageReader(&llm.Request{Model: "m"}, "text/event-stream", readerOpts())
	r.Write(one)
	if n := testing.AllocsPerRun(20, func() { r.Write(one) }); n > 0 {
		t.Errorf("responses: got %.1f allocations per body, want 0", n)
	}
}

// BenchmarkParseRequest measures estimation of a 1 MB prompt.
func BenchmarkParseRequest(b *testing.B) {
	text := strings.Repeat("lorem ipsum ", 1<<20/12)
	for _, tc := range []struct {
		name string
		api  llm.API
		body string
	}{
		{"chat", Chat{}, `{"model":"m","messages":[{"role":"user","content":"` + text + `"}],"max_tokens":5}`},
		{"responses", Responses{}, `{"model":"m","input":"` + text + `","max_output_tokens":50}`},
		{"completions", Completions{}, `{"model":"m","prompt":"` + text + `","max_tokens":5}`},
		{"embeddings", Embeddings{}, `{"model":"m","input":["` + text + `"]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tc.api.ParseRequest("/v1/x", body, parseOpts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
