package openai

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

// addFixtureSeeds adds every response fixture with the given suffix as a
// seed, split in the middle.
func addFixtureSeeds(f *testing.F, suffix string) {
	f.Helper()
	entries, err := os.ReadDir(fixtureDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), suffix) || strings.Contains(e.Name(), "request") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(fixtureDir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > 64<<10 {
			b = b[len(b)-64<<10:]
		}
		f.Add(b, uint16(len(b)/2))
	}
}

// fuzzReader checks that a reader never panics and that where the body is
// split does not change what it reports.
func fuzzReader(f *testing.F, newReader func() llm.UsageReader) {
	f.Fuzz(func(t *testing.T, body []byte, cut uint16) {
		c := int(cut) % (len(body) + 1)
		whole := feed(newReader, body)
		split := feed(newReader, body, c)
		if whole != split {
			t.Fatalf("split at %d: got %+v, whole body gave %+v", c, split, whole)
		}
	})
}

func FuzzStreamReader(f *testing.F) {
	addFixtureSeeds(f, ".sse")
	f.Add([]byte("data: {\"usage\":{\"prompt_tokens\":-5,\"completion_tokens\":1e400}}\n\n"), uint16(9))
	f.Add([]byte("data: {\"response\":{\"usage\":{\"input_tokens\":\"x\"}}}\r\r"), uint16(3))
	fuzzReader(f, func() llm.UsageReader {
		return NewStreamReader("m", llm.ReaderOptions{MaxBuffer: 256}, ChatDeltaText)
	})
}

func FuzzResponsesStreamReader(f *testing.F) {
	addFixtureSeeds(f, ".sse")
	fuzzReader(f, func() llm.UsageReader {
		return Responses{}.NewUsageReader(&llm.Request{Model: "m"}, "text/event-stream", readerOpts())
	})
}

func FuzzJSONReader(f *testing.F) {
	addFixtureSeeds(f, ".json")
	fuzzReader(f, func() llm.UsageReader { return NewJSONReader(llm.ReaderOptions{MaxBuffer: 1024}) })
}

func FuzzParseRequest(f *testing.F) {
	entries, _ := os.ReadDir(fixtureDir)
	for _, e := range entries {
		if strings.Contains(e.Name(), "request") {
			b, _ := os.ReadFile(filepath.Join(fixtureDir, e.Name()))
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, api := range apis {
			req, err := api.ParseRequest("/v1/x", body, parseOpts)
			if err != nil {
				continue
			}
			if req.InputTokens < 0 || req.OutputCap < 0 || req.Choices < 1 {
				t.Fatalf("%s: implausible request %+v", api.Name(), req)
			}
			if _, err := api.Inject(body, &req, llm.InjectOptions{OutputCap: true, StreamUsage: true}); err != nil {
				t.Fatalf("%s: Inject failed on a body that parsed: %v", api.Name(), err)
			}
		}
	})
}
