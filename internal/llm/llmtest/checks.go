package llmtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// PathCase is a request path and what it names: the model and whether the
// call streams; OK is false for a path that names no model.
type PathCase struct {
	Path   string
	Model  string
	Stream bool
	OK     bool
	// Routed: the path is the API's though it names no model (OK is
	// false): routing meters it, and parsing refuses it.
	Routed bool
}

// CheckPaths checks, for an API that names the model in the path, that
// modelFromPath reads each case's path as the case says, and that
// matchPath (the check routing uses) accepts the paths that name a model
// and those marked Routed.
func CheckPaths(t *testing.T, modelFromPath func(string) (string, bool, bool), matchPath func(string) bool, cases []PathCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Path, func(t *testing.T) {
			model, stream, ok := modelFromPath(tc.Path)
			if model != tc.Model || stream != tc.Stream || ok != tc.OK {
				t.Errorf("got %q %v %v, want %q %v %v", model, stream, ok, tc.Model, tc.Stream, tc.OK)
			}
			if got, want := matchPath(tc.Path), tc.OK || tc.Routed; got != want {
				t.Errorf("matched: got %v, want %v", got, want)
			}
		})
	}
}

// BadRequest is a request body, sent to Path, that ParseRequest must
// refuse, with an error containing Error (when set).
type BadRequest struct {
	Name  string
	Path  string
	Body  string
	Error string
}

// CheckRefused checks that api refuses every one of bad: a body it cannot
// estimate must get a 400, not a reservation made up from defaults.
func CheckRefused(t *testing.T, api llm.API, bad []BadRequest) {
	t.Helper()
	for _, tc := range bad {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := api.ParseRequest(tc.Path, []byte(tc.Body), ParseOptions())
			if err == nil {
				t.Fatalf("got no error for %s", tc.Body)
			}
			if !strings.Contains(err.Error(), tc.Error) {
				t.Errorf("got error %q, want one containing %q", err, tc.Error)
			}
		})
	}
}

// ErrorReader is a reader that notices an error the provider reports
// mid-stream, after its 200 status.
type ErrorReader interface {
	Write(p []byte)
	Errored() bool
}

// CheckErrored writes each fixture of d named in want to a new reader and
// checks that the reader reports an error exactly where want says.
func CheckErrored[R ErrorReader](t *testing.T, d Dir, newReader func() R, want map[string]bool) {
	t.Helper()
	files := make([]string, 0, len(want))
	for f := range want {
		files = append(files, f)
	}
	slices.Sort(files)
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			r := newReader()
			r.Write(d.Read(t, file))
			if got := r.Errored(); got != want[file] {
				t.Errorf("got errored %v, want %v", got, want[file])
			}
		})
	}
}

// ReadUsage writes body, a response of contentType, to the reader api
// returns and returns the usage it reports, failing t if it reports none.
func ReadUsage(t *testing.T, api llm.API, contentType string, body []byte) accounting.Usage {
	t.Helper()
	r := api.NewUsageReader(&llm.Request{Model: "m"}, contentType, ReaderOptions())
	r.Write(body)
	u, ok := r.Usage()
	if !ok {
		t.Fatal("our reader found no usage")
	}
	return u
}
