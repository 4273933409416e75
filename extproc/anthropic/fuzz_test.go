package anthropic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

func addFixtureSeeds(f *testing.F, suffix string) {
	f.Helper()
	entries, err := os.ReadDir(fixtureDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) && !strings.Contains(e.Name(), "request") {
			b, err := os.ReadFile(filepath.Join(fixtureDir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, uint16(len(b)/2))
		}
	}
}

// fuzzReader checks that a reader never panics and that where the body is
// split does not change what it reports.
func fuzzReader(f *testing.F, contentType string) {
	newReader := func() llm.UsageReader {
		return Messages{}.NewUsageReader(&llm.Request{Model: "m"}, contentType, llm.ReaderOptions{MaxBuffer: 512})
	}
	f.Fuzz(func(t *testing.T, body []byte, cut uint16) {
		c := int(cut) % (len(body) + 1)
		whole, split := feed(newReader, body), feed(newReader, body, c)
		if whole != split {
			t.Fatalf("split at %d: got %+v, whole body gave %+v", c, split, whole)
		}
		if whole.usage.InputTokens < 0 || whole.usage.OutputTokens < 0 || whole.usage.CachedInputTokens > whole.usage.InputTokens {
			t.Fatalf("implausible usage %+v", whole.usage)
		}
	})
}

func FuzzStreamReader(f *testing.F) {
	addFixtureSeeds(f, ".sse")
	f.Add([]byte("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":-3,\"input_tokens\":null}}\n\n"), uint16(20))
	fuzzReader(f, "text/event-stream")
}

func FuzzJSONReader(f *testing.F) {
	addFixtureSeeds(f, ".json")
	fuzzReader(f, "application/json")
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
		req, err := Messages{}.ParseRequest("/v1/messages", body, parseOpts)
		if err != nil {
			return
		}
		if req.InputTokens < 0 || req.OutputCap < 1 {
			t.Fatalf("implausible request %+v", req)
		}
		if _, err := (Messages{}).Inject(body, &req, llm.InjectOptions{OutputCap: true}); err != nil {
			t.Fatalf("Inject failed on a body that parsed: %v", err)
		}
	})
}
