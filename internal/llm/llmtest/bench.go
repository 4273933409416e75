package llmtest

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// chunk is how much of a body a benchmark writes at a time: Envoy hands a
// streamed body over in chunks of about this size.
const chunk = 16 << 10

// BenchReader measures the reader api returns for a response of
// contentType to a request for model, over body fed in 16 KiB chunks.
// allocs/op is per body: a reader's own setup, not per event.
func BenchReader(b *testing.B, api llm.API, model, contentType string, body []byte) {
	b.Helper()
	req := &llm.Request{Model: model}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := api.NewUsageReader(req, contentType, ReaderOptions())
		for i := 0; i < len(body); i += chunk {
			r.Write(body[i:min(i+chunk, len(body))])
		}
		if _, ok := r.Usage(); !ok {
			b.Fatal("no usage")
		}
	}
}

// BenchParse measures api's estimate of body, sent to path.
func BenchParse(b *testing.B, api llm.API, path string, body []byte) {
	b.Helper()
	opts := ParseOptions()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := api.ParseRequest(path, body, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// LongPrompt returns about 1 MB of prompt text without JSON escapes, for
// BenchParse: a long prompt is where estimation costs.
func LongPrompt() string { return strings.Repeat("lorem ipsum ", 1<<20/12) }

// CheckNoAllocs fails t if r, once warmed up by body, allocates when body
// is written to it again: past its setup a reader must allocate nothing
// per event, or a busy server's garbage would grow with its traffic. (A
// text with JSON escapes costs one allocation, as gjson unescapes it;
// fixtures used here should have none.)
func CheckNoAllocs(t *testing.T, name string, r llm.UsageReader, body []byte) {
	t.Helper()
	r.Write(body) // warm up buffers
	if n := testing.AllocsPerRun(20, func() { r.Write(body) }); n > 0 {
		t.Errorf("%s: got %.1f allocations per body, want 0", name, n)
	}
}
