package llmtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// Explain parses body, sent to path, with api and opts, explaining it,
// and returns the Request and the parts reported.
func Explain(api llm.API, path string, body []byte, opts llm.ParseOptions) (llm.Request, []llm.Part, error) {
	var parts []llm.Part
	opts.Explain = func(p llm.Part) { parts = append(parts, p) }
	req, err := api.ParseRequest(path, body, opts)
	return req, parts, err
}

// CheckExplained checks that explaining a parse changes nothing and
// leaves nothing out: parsed with opts.Explain set, body gives the same
// Request (or the same error) as without it, and the parts reported, each
// named and positive, sum to the Request's InputTokens. A format that
// counts a part without reporting it fails here, on every body the tests
// feed it.
func CheckExplained(t testing.TB, api llm.API, path string, body []byte, opts llm.ParseOptions) {
	t.Helper()
	opts.Explain = nil
	want, wantErr := api.ParseRequest(path, body, opts)
	got, parts, err := Explain(api, path, body, opts)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%s: explained, the parse fails with %v; unexplained, with %v\n%s", api.Name(), err, wantErr, body)
	}
	if err != nil {
		return
	}
	if got != want {
		t.Fatalf("%s: explained, the body reads as\n  %+v\nunexplained, as\n  %+v\n%s", api.Name(), got, want, body)
	}
	var sum int64
	for _, p := range parts {
		if p.Name == "" || p.Tokens <= 0 {
			t.Fatalf("%s: implausible part %+v\n%s", api.Name(), p, body)
		}
		sum += p.Tokens
	}
	if sum != got.InputTokens {
		t.Fatalf("%s: the parts sum to %d, the input estimate is %d: a part is not reported\nparts: %+v\n%s",
			api.Name(), sum, got.InputTokens, parts, body)
	}
}

// CheckParts checks that body, sent to path, is explained in the parts
// want lists, one "name: tokens (detail)" each, in order (see
// [ParseOptions] for the figures).
func CheckParts(t *testing.T, api llm.API, path string, body []byte, want ...string) {
	t.Helper()
	_, parts, err := Explain(api, path, body, ParseOptions())
	if err != nil {
		t.Fatalf("%s: %v", api.Name(), err)
	}
	got := make([]string, len(parts))
	for i, p := range parts {
		got[i] = fmt.Sprintf("%s: %d", p.Name, p.Tokens)
		if p.Detail != "" {
			got[i] += " (" + p.Detail + ")"
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: got parts\n\t%s\nwant\n\t%s", api.Name(), strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
