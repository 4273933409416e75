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

// CheckParseAllocs checks that api's parse of the body that body(n)
// returns for n repetitions of its parts, sent to path, allocates as
// much for n = 64 as for n = 1: a parse that does not explain itself (the
// server's) must allocate nothing per part, or a busy server's garbage
// would grow with the size of its requests. Parts that allocate of
// themselves (an image whose header is decoded, a string with JSON
// escapes) should be left out of body.
func CheckParseAllocs(t *testing.T, api llm.API, path string, body func(n int) []byte) {
	t.Helper()
	opts := ParseOptions()
	allocs := func(n int) float64 {
		b := body(n)
		if _, err := api.ParseRequest(path, b, opts); err != nil {
			t.Fatalf("%s: %v\n%s", api.Name(), err, b)
		}
		return testing.AllocsPerRun(20, func() { _, _ = api.ParseRequest(path, b, opts) })
	}
	if one, many := allocs(1), allocs(64); many != one {
		t.Errorf("%s: got %.1f allocations for 64 repetitions of the parts, %.1f for one; want as many", api.Name(), many, one)
	}
}

// Repeat returns part n times, joined by commas: the elements of a JSON
// array, for the body of [CheckParseAllocs].
func Repeat(part string, n int) string {
	return strings.Repeat(part+",", n-1) + part
}
