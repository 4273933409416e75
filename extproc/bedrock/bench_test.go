package bedrock

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

func benchReader(b *testing.B, contentType string, body []byte) {
	req := &llm.Request{Model: "anthropic.claude-3-5-sonnet-20240620-v1:0"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := Converse{}.NewUsageReader(req, contentType, readerOpts())
		for i := 0; i < len(body); i += 16 << 10 {
			r.Write(body[i:min(i+16<<10, len(body))])
		}
		if _, ok := r.Usage(); !ok {
			b.Fatal("no usage")
		}
	}
}

func BenchmarkUsage(b *testing.B) {
	b.Run("eventstream", func(b *testing.B) {
		benchReader(b, ContentType, bytes.Repeat(readFixture(b, "converse_stream_tool.eventstream"), 100))
	})
	b.Run("json", func(b *testing.B) {
		benchReader(b, "application/json", readFixture(b, "converse.json"))
	})
}

func TestStreamAllocsPerEvent(t *testing.T) {
	one := readFixture(t, "converse_stream.eventstream") // no JSON escapes: see the openai package
	r := Converse{}.NewUsageReader(&llm.Request{Model: "m"}, ContentType, readerOpts())
	r.Write(one)
	if n := testing.AllocsPerRun(20, func() { r.Write(one) }); n > 0 {
		t.Errorf("got %.1f allocations per body, want 0", n)
	}
}

// BenchmarkParseRequest measures estimation of a 1 MB prompt.
func BenchmarkParseRequest(b *testing.B) {
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"` + strings.Repeat("lorem ipsum ", 1<<20/12) +
		`"}]}],"inferenceConfig":{"maxTokens":5}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Converse{}).ParseRequest("/model/m/converse", body, parseOpts); err != nil {
			b.Fatal(err)
		}
	}
}
