package bedrock

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc/llm"
)

// fixtureDir holds the request and response fixtures, and cases.json,
// which says what each one must give.
const fixtureDir = "../../testdata/bedrock"

// apis names the API values cases.json refers to.
var apis = map[string]llm.API{
	"converse": Converse{},
}

type responseCase struct {
	File        string            `json:"file"`
	API         string            `json:"api"`
	ContentType string            `json:"content_type"`
	Model       string            `json:"model"`
	Usage       *accounting.Usage `json:"usage"` // null: the response reports none
	Observed    int64             `json:"observed"`
	Note        string            `json:"note"`
}

type requestCase struct {
	File  string      `json:"file"`
	API   string      `json:"api"`
	Path  string      `json:"path"`
	Want  llm.Request `json:"want"`
	Error string      `json:"error"` // a substring of the expected error
}

type cases struct {
	Responses []responseCase `json:"responses"`
	Requests  []requestCase  `json:"requests"`
}

func loadCases(t testing.TB) cases {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c cases
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("cases.json: %v", err)
	}
	return c
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var parseOpts = llm.ParseOptions{Counter: accounting.Approximate{CharsPerToken: 4}, DefaultOutputCap: 4096}

func readerOpts() llm.ReaderOptions {
	return llm.ReaderOptions{Counter: accounting.Approximate{CharsPerToken: 4}}
}

// result is what a reader reports at the end of a body.
type result struct {
	usage    accounting.Usage
	ok       bool
	observed int64
}

// feed writes body to a new reader in the pieces that cuts (ascending
// offsets) make.
func feed(newReader func() llm.UsageReader, body []byte, cuts ...int) result {
	r := newReader()
	prev := 0
	for _, c := range cuts {
		r.Write(body[prev:c])
		prev = c
	}
	r.Write(body[prev:])
	u, ok := r.Usage()
	return result{u, ok, r.ObservedOutputTokens()}
}

// checkSplits feeds body whole, byte by byte, and split in two at every
// offset (or, for a big body, at 300 random sets of cuts), and checks that
// every feeding reports what the whole body does.
func checkSplits(t *testing.T, newReader func() llm.UsageReader, body []byte, want result) {
	t.Helper()
	check := func(how string, got result) {
		t.Helper()
		if got.ok != want.ok || got.usage != want.usage {
			t.Fatalf("%s: got usage %+v (ok %v), want %+v (ok %v)", how, got.usage, got.ok, want.usage, want.ok)
		}
		if got.observed != want.observed {
			t.Fatalf("%s: got observed %d, want %d", how, got.observed, want.observed)
		}
	}
	check("whole", feed(newReader, body))
	if len(body) <= 16<<10 {
		for i := 0; i <= len(body); i++ {
			check("split at "+itoa(i), feed(newReader, body, i))
		}
		r := newReader()
		for i := range body {
			r.Write(body[i : i+1])
		}
		u, ok := r.Usage()
		check("byte by byte", result{u, ok, r.ObservedOutputTokens()})
		return
	}
	rng := rand.New(rand.NewPCG(1, uint64(len(body))))
	for range 300 {
		cuts := make([]int, 1+rng.IntN(8))
		for j := range cuts {
			cuts[j] = rng.IntN(len(body) + 1)
		}
		sortInts(cuts)
		check("cuts "+strings.Trim(strings.Join(strings.Fields(itoaAll(cuts)), ","), "[]"), feed(newReader, body, cuts...))
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func itoaAll(v []int) string { b, _ := json.Marshal(v); return string(b) }

func sortInts(v []int) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j] < v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
}

func TestResponseFixtures(t *testing.T) {
	for _, tc := range loadCases(t).Responses {
		t.Run(tc.File, func(t *testing.T) {
			api, ok := apis[tc.API]
			if !ok {
				t.Fatalf("unknown api %q", tc.API)
			}
			body := readFixture(t, tc.File)
			req := &llm.Request{Model: tc.Model}
			newReader := func() llm.UsageReader { return api.NewUsageReader(req, tc.ContentType, readerOpts()) }
			want := result{ok: tc.Usage != nil, observed: tc.Observed}
			if tc.Usage != nil {
				want.usage = *tc.Usage
			}
			checkSplits(t, newReader, body, want)
		})
	}
}

func TestRequestFixtures(t *testing.T) {
	for _, tc := range loadCases(t).Requests {
		t.Run(tc.File, func(t *testing.T) {
			api, ok := apis[tc.API]
			if !ok {
				t.Fatalf("unknown api %q", tc.API)
			}
			got, err := api.ParseRequest(tc.Path, readFixture(t, tc.File), parseOpts)
			if tc.Error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.Error) {
					t.Fatalf("got error %v, want one containing %q", err, tc.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got != tc.Want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.Want)
			}
		})
	}
}

// TestFixturesListed keeps cases.json complete: every fixture has an
// expectation.
func TestFixturesListed(t *testing.T) {
	c := loadCases(t)
	listed := map[string]bool{"cases.json": true}
	for _, r := range c.Responses {
		listed[r.File] = true
	}
	for _, r := range c.Requests {
		listed[r.File] = true
	}
	entries, err := os.ReadDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		// Event stream sources are checked by TestEventStreamFixtures.
		if !listed[e.Name()] && !strings.HasSuffix(e.Name(), ".events.json") {
			t.Errorf("%s has no entry in cases.json", e.Name())
		}
	}
}
