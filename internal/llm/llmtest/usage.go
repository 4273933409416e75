package llmtest

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// Usage is a usage report and what a reader must make of it.
type Usage struct {
	Name string
	// Body is a response body, of the reader's content type, that
	// reports the usage.
	Body string
	Want accounting.Usage
	// Unreadable: the body's usage is there but cannot be read
	// unambiguously, so the reader must report none (and Want is zero),
	// leaving settlement to its fallback.
	Unreadable bool
}

// CheckUsage writes each case's body to a new reader of api for
// contentType and checks the usage it reports: every count within
// 0..accounting.MaxTokens whatever the provider sends (1e30, -5, 1.5e308,
// 9223372036854775808, fractions), and a total that is never negative.
func CheckUsage(t *testing.T, api llm.API, contentType string, cases []Usage) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			if tc.Unreadable {
				r := api.NewUsageReader(&llm.Request{Model: "m"}, contentType, ReaderOptions())
				r.Write([]byte(tc.Body))
				if u, ok := r.Usage(); ok {
					t.Errorf("got usage %+v, want none: it is unreadable", u)
				}
				return
			}
			got := ReadUsage(t, api, contentType, []byte(tc.Body))
			if got != tc.Want {
				t.Errorf("got  %+v\nwant %+v", got, tc.Want)
			}
			if total := got.Total(); total < 0 || total > accounting.MaxTokens {
				t.Errorf("got total %d, want 0..%d", total, int64(accounting.MaxTokens))
			}
		})
	}
}
