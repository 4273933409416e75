package gemini

import (
	"bytes"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
	"github.com/tokenwarden/tokenwarden/internal/llm/llmtest"
)

// bigArray repeats the elements of the JSON-array stream fixture.
func bigArray(t testing.TB, n int) []byte {
	t.Helper()
	inner := bytes.TrimSuffix(bytes.TrimPrefix(fixtures.Read(t, "stream_array.json"), []byte("[")), []byte("]"))
	parts := make([][]byte, n)
	for i := range parts {
		parts[i] = inner
	}
	return append(append([]byte("["), bytes.Join(parts, []byte("\r\n,\r\n"))...), ']')
}

func BenchmarkUsage(b *testing.B) {
	const model = "gemini-2.5-flash"
	b.Run("sse_stream", func(b *testing.B) {
		llmtest.BenchReader(b, GenerateContent{}, model, "text/event-stream", bytes.Repeat(fixtures.Read(b, "stream_sse_cached_tools.sse"), 100))
	})
	b.Run("json_array_stream", func(b *testing.B) {
		llmtest.BenchReader(b, GenerateContent{}, model, "application/json", bigArray(b, 100))
	})
	b.Run("json", func(b *testing.B) {
		llmtest.BenchReader(b, GenerateContent{}, model, "application/json", fixtures.Read(b, "generate.json"))
	})
}

func TestAllocsPerEvent(t *testing.T) {
	for _, tc := range []struct {
		name, contentType string
		body              []byte
	}{
		{"sse", "text/event-stream", fixtures.Read(t, "stream_sse_cached_tools.sse")},
		{"json array", "application/json", bigArray(t, 3)},
	} {
		r := GenerateContent{}.NewUsageReader(&llm.Request{Model: "m"}, tc.contentType, llmtest.ReaderOptions())
		llmtest.CheckNoAllocs(t, tc.name, r, tc.body)
	}
}

// BenchmarkParseRequest measures estimation of a 1 MB prompt.
func BenchmarkParseRequest(b *testing.B) {
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"` + llmtest.LongPrompt() +
		`"}]}],"generationConfig":{"maxOutputTokens":5}}`)
	llmtest.BenchParse(b, GenerateContent{}, "/v1beta/models/m:generateContent", body)
}

// TestParseAllocs: without an explanation, the parse allocates nothing
// per content or part.
func TestParseAllocs(t *testing.T) {
	llmtest.CheckParseAllocs(t, GenerateContent{}, "/v1beta/models/gemini-2.5-flash:generateContent", func(n int) []byte {
		return []byte(`{"systemInstruction":{"parts":[{"text":"Terse."}]},"contents":[` +
			llmtest.Repeat(`{"role":"user","parts":[{"text":"hi"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]},`+
				`{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}},{"thought":true,"text":"t"}]}`, n) +
			`],"tools":[{"functionDeclarations":[{"name":"f"}]}]}`)
	})
}
