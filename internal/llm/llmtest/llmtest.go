package llmtest

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// Dir is a folder of fixtures: request and response bodies and the
// cases.json that says what each must give (see the package doc).
type Dir string

// Read returns the contents of the fixture name, failing t if it cannot
// be read.
func (d Dir) Read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(string(d), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ParseOptions returns the options the request expectations in cases.json
// were worked out with: four characters a token, a 4096-token default cap.
func ParseOptions() llm.ParseOptions {
	return llm.ParseOptions{Counter: Chars{PerToken: 4}, DefaultOutputCap: 4096}
}

// ReaderOptions returns the options the response expectations in
// cases.json were worked out with: four characters a token and the
// default buffer.
func ReaderOptions() llm.ReaderOptions {
	return llm.ReaderOptions{Counter: Chars{PerToken: 4}}
}

// Config says what one wire-format package's fixtures exercise.
type Config struct {
	// Dir is the package's fixture folder.
	Dir Dir
	// APIs maps the "api" names cases.json uses to the API values.
	APIs map[string]llm.API
	// Unlisted reports a file of Dir that needs no entry in cases.json
	// because a test of the package's own checks it (bedrock's
	// .events.json sources of its binary fixtures). Nil: every file needs
	// one.
	Unlisted func(name string) bool
}

// Run checks every fixture of cfg.Dir against cases.json, in subtests
// "responses/<file>", "requests/<file>" and "listed" (see the package
// doc).
func Run(t *testing.T, cfg Config) {
	t.Helper()
	c := loadCases(t, cfg.Dir)
	api := func(t *testing.T, name string) llm.API {
		t.Helper()
		a, ok := cfg.APIs[name]
		if !ok {
			t.Fatalf("unknown api %q", name)
		}
		return a
	}
	t.Run("responses", func(t *testing.T) {
		for _, tc := range c.Responses {
			t.Run(tc.File, func(t *testing.T) {
				a := api(t, tc.API)
				body := cfg.Dir.Read(t, tc.File)
				req := &llm.Request{Model: tc.Model}
				newReader := func() llm.UsageReader { return a.NewUsageReader(req, tc.ContentType, ReaderOptions()) }
				want := result{OK: tc.Usage != nil, Observed: tc.Observed}
				if tc.Usage != nil {
					want.Usage = *tc.Usage
				}
				checkSplits(t, newReader, body, want)
			})
		}
	})
	t.Run("requests", func(t *testing.T) {
		for _, tc := range c.Requests {
			t.Run(tc.File, func(t *testing.T) {
				got, err := api(t, tc.API).ParseRequest(tc.Path, cfg.Dir.Read(t, tc.File), ParseOptions())
				if tc.Error != "" {
					if err == nil || !strings.Contains(err.Error(), tc.Error) {
						t.Fatalf("got error %v, want one containing %q", err, tc.Error)
					}
					return
				}
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				// The Shape is the parse's note to Inject, which
				// the fixtures cannot spell; the edit tests hold it.
				got.Shape = llm.Shape{}
				if got != tc.Want {
					t.Fatalf("got  %+v\nwant %+v", got, tc.Want)
				}
				CheckExplained(t, api(t, tc.API), tc.Path, cfg.Dir.Read(t, tc.File), ParseOptions())
			})
		}
	})
	// Keeps cases.json complete: a fixture without an entry would be
	// checked by nothing.
	t.Run("listed", func(t *testing.T) {
		listed := map[string]bool{"cases.json": true}
		for _, r := range c.Responses {
			listed[r.File] = true
		}
		for _, r := range c.Requests {
			listed[r.File] = true
		}
		entries, err := os.ReadDir(string(cfg.Dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !listed[e.Name()] && (cfg.Unlisted == nil || !cfg.Unlisted(e.Name())) {
				t.Errorf("%s has no entry in cases.json", e.Name())
			}
		}
	})
}

// responseCase is an entry of cases.json's "responses".
type responseCase struct {
	File        string            `json:"file"`
	API         string            `json:"api"`
	ContentType string            `json:"content_type"`
	Model       string            `json:"model"`
	Usage       *accounting.Usage `json:"usage"` // null: the response reports none
	Observed    int64             `json:"observed"`
	Note        string            `json:"note"`
}

// requestCase is an entry of cases.json's "requests".
type requestCase struct {
	File  string      `json:"file"`
	API   string      `json:"api"`
	Path  string      `json:"path"`
	Want  llm.Request `json:"want"`
	Error string      `json:"error"` // a substring of the expected error
}

// cases is cases.json.
type cases struct {
	Responses []responseCase `json:"responses"`
	Requests  []requestCase  `json:"requests"`
}

func loadCases(t testing.TB, d Dir) cases {
	t.Helper()
	var c cases
	if err := json.Unmarshal(d.Read(t, "cases.json"), &c); err != nil {
		t.Fatalf("cases.json: %v", err)
	}
	return c
}

// result is what a reader reports at the end of a body.
type result struct {
	Usage    accounting.Usage
	OK       bool
	Observed int64
}

// feed writes body to a new reader in the pieces that cuts (ascending
// offsets) make, and returns what it reports at the end.
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
// offset (or, for a body over 16 KiB, where that would be quadratic, at
// 300 random sets of cuts), and checks that every feeding reports want.
func checkSplits(t *testing.T, newReader func() llm.UsageReader, body []byte, want result) {
	t.Helper()
	check := func(how string, got result) {
		t.Helper()
		if got.OK != want.OK || got.Usage != want.Usage {
			t.Fatalf("%s: got usage %+v (ok %v), want %+v (ok %v)", how, got.Usage, got.OK, want.Usage, want.OK)
		}
		if got.Observed != want.Observed {
			t.Fatalf("%s: got observed %d, want %d", how, got.Observed, want.Observed)
		}
	}
	check("whole", feed(newReader, body))
	if len(body) <= 16<<10 {
		for i := 0; i <= len(body); i++ {
			check("split at "+strconv.Itoa(i), feed(newReader, body, i))
		}
		r := newReader()
		for i := range body {
			r.Write(body[i : i+1])
		}
		u, ok := r.Usage()
		check("byte by byte", result{u, ok, r.ObservedOutputTokens()})
		return
	}
	// Seeded by the size, so that a failure repeats.
	rng := rand.New(rand.NewPCG(1, uint64(len(body))))
	for range 300 {
		cuts := make([]int, 1+rng.IntN(8))
		for j := range cuts {
			cuts[j] = rng.IntN(len(body) + 1)
		}
		slices.Sort(cuts)
		how := make([]string, len(cuts))
		for j, c := range cuts {
			how[j] = strconv.Itoa(c)
		}
		check("cuts "+strings.Join(how, ","), feed(newReader, body, cuts...))
	}
}
