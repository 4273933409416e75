package gemini

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

func benchReader(b *testing.B, contentType string, body []byte) {
	req := &llm.Request{Model: "gemini-2.5-flash"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := GenerateContent{}.NewUsageReader(req, contentType, readerOpts())
		for i := 0; i < len(body); i += 16 << 10 {
			r.Write(body[i:min(i+16<<10, len(body))])
		}
		if _, ok := r.Usage(); !ok {
			b.Fatal("no usage")
		}
	}
}

// bigArray repeats the elements of the JSON-array stream fixture.
func bigArray(t testing.TB, n int) []byte {
	inner := bytes.TrimSuffix(bytes.TrimPrefix(readFixture(t, "stream_array.json"), []byte("[")), []byte("]"))
	parts := make([][]byte, n)
	for i := range parts {
		parts[i] = inner
	}
	return append(append([]byte("["), bytes.Join(parts, []byte("\r\n,\r\n"))...), ']')
}

func BenchmarkUsage(b *testing.B) {
	b.Run("sse_stream", func(b *testing.B) {
		benchReader(b, "text/event-stream", bytes.Repeat(readFixture(b, "stream_sse_cached_tools.sse"), 100))
	})
	b.Run("json_array_stream", func(b *testing.B) {
		benchReader(b, "application/json", bigArray(b, 100))
	})
	b.Run("json", func(b *testing.B) {
		benchReader(b, "application/json", readFixture(b, "generate.json"))
	})
}

func TestAllocsPerEvent(t *testing.T) {
	for _, tc := range []struct {
		name, contentType string
		body              []byte
	}{
		{"sse", "text/event-stream", readFixture(t, "stream_sse_cached_tools.sse")},
		{"json array", "application/json", bigArray(t, 3)},
	} {
		r := GenerateContent{}.NewUsageReader(&llm.Request{Model: "m"}, tc.contentType, readerOpts())
		r.Write(tc.body)
		if n := testing.AllocsPerRun(20, func() { r.Write(tc.body) }); n > 0 {
			t.Errorf("%s: got %.1f allocations per body, want 0", tc.name, n)
		}
	}
}

// BenchmarkParseRequest measures estimation of a 1 MB prompt.
func BenchmarkParseRequest(b *testing.B) {
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"` + strings.Repeat("lorem ipsum ", 1<<20/12) +
		`"}]}],"generationConfig":{"maxOutputTokens":5}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (GenerateContent{}).ParseRequest("/v1beta/models/m:generateContent", body, parseOpts); err != nil {
			b.Fatal(err)
		}
	}
}
