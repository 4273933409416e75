package bedrock

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
		if strings.HasSuffix(e.Name(), suffix) && !strings.Contains(e.Name(), "request") && !strings.HasSuffix(e.Name(), ".events.json") && e.Name() != "cases.json" {
			b, err := os.ReadFile(filepath.Join(fixtureDir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, uint16(len(b)/2))
		}
	}
}

func fuzzReader(f *testing.F, contentType string) {
	newReader := func() llm.UsageReader {
		return Converse{}.NewUsageReader(&llm.Request{Model: "m"}, contentType, llm.ReaderOptions{MaxBuffer: 256})
	}
	f.Fuzz(func(t *testing.T, body []byte, cut uint16) {
		c := int(cut) % (len(body) + 1)
		whole, split := feed(newReader, body), feed(newReader, body, c)
		if whole != split {
			t.Fatalf("split at %d: got %+v, whole body gave %+v", c, split, whole)
		}
		u := whole.usage
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CachedInputTokens > u.InputTokens {
			t.Fatalf("implausible usage %+v", u)
		}
	})
}

func FuzzStreamReader(f *testing.F) {
	addFixtureSeeds(f, ".eventstream")
	fuzzReader(f, ContentType)
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
			f.Add("/model/amazon.nova-lite-v1%3A0/converse-stream", b)
		}
	}
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		req, err := Converse{}.ParseRequest(path, body, parseOpts)
		if err != nil {
			return
		}
		if req.Model == "" || req.InputTokens < 0 || req.OutputCap < 1 {
			t.Fatalf("implausible request %+v", req)
		}
		if _, err := (Converse{}).Inject(body, &req, llm.InjectOptions{OutputCap: true}); err != nil {
			t.Fatalf("Inject failed on a body that parsed: %v", err)
		}
	})
}
