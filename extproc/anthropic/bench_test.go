package anthropic

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

func benchReader(b *testing.B, contentType string, body []byte) {
	req := &llm.Request{Model: "claude-sonnet-4-5"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := Messages{}.NewUsageReader(req, contentType, readerOpts())
		for i := 0; i < len(body); i += 16 << 10 {
			r.Write(body[i:min(i+16<<10, len(body))])
		}
		if _, ok := r.Usage(); !ok {
			b.Fatal("no usage")
		}
	}
}

func BenchmarkUsage(b *testing.B) {
	b.Run("stream", func(b *testing.B) {
		benchReader(b, "text/event-stream", bytes.Repeat(readFixture(b, "messages_stream.sse"), 100))
	})
	b.Run("json", func(b *testing.B) {
		benchReader(b, "application/json", readFixture(b, "messages_1h.json"))
	})
}

func TestStreamAllocsPerEvent(t *testing.T) {
	one := readFixture(t, "messages_stream.sse")
	r := Messages{}.NewUsageReader(&llm.Request{Model: "m"}, "text/event-stream", readerOpts())
	r.Write(one)
	if n := testing.AllocsPerRun(20, func() { r.Write(one) }); n > 0 {
		t.Errorf("got %.1f allocations per body, want 0", n)
	}
}

// BenchmarkParseRequest measures estimation of a 1 MB prompt.
func BenchmarkParseRequest(b *testing.B) {
	body := []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"` +
		strings.Repeat("lorem ipsum ", 1<<20/12) + `"}]}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Messages{}).ParseRequest("/v1/messages", body, parseOpts); err != nil {
			b.Fatal(err)
		}
	}
}
