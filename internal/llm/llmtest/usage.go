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
}

// CheckUsage writes each case's body to a new reader of api for
// contentType and checks the usage it reports: every count within
// 0..accounting.MaxTokens whatever the provider sends (1e30, -5, 1.5e308,
// 9223372036854775808, fractions), and a total that is never negative.
func CheckUsage(t *testing.T, api llm.API, contentType string, cases []Usage) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
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
