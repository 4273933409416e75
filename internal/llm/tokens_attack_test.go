package llm

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// Attacks on TokenCountRaw, the fast path of the streamed usage readers'
// counts: numbers at the edges of plainCount's digits-only reading (its
// length bound, int64's, the clamp at accounting.MaxTokens) and every
// other form JSON allows, each read as TokenCount reads gjson's value.
func TestTokenCountRawAttacks(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int64
	}{
		{`9007199254740991`, accounting.MaxTokens - 1},
		{`9007199254740992`, accounting.MaxTokens},
		{`99999999999999999`, accounting.MaxTokens},  // 17 digits
		{`999999999999999999`, accounting.MaxTokens}, // 18: the longest plainCount reads
		{`9999999999999999999`, accounting.MaxTokens},
		{`1000000000000000000`, accounting.MaxTokens},
		{`0000000000000000012`, 12}, // 19 digits, past plainCount, as ParseInt reads them
		{`000000000000000012`, 12},
		{`9223372036854775807`, accounting.MaxTokens},
		{`9223372036854775808`, accounting.MaxTokens},
		{`18446744073709551616`, accounting.MaxTokens},
		{strings.Repeat("9", 400), accounting.MaxTokens},
		{"-" + strings.Repeat("9", 400), 0},
		{"0." + strings.Repeat("9", 400), 1},
		{`0.99999999999999999`, 1}, // a float64 rounds it to 1
		{`-0`, 0},
		{`-0.0`, 0},
		{`-0e5`, 0},
		{`0e0`, 0},
		{`1e0`, 1},
		{`1e-400`, 0},
		{`10e-1`, 1},
		{`12.999`, 12},
		{`1.5E2`, 150},
		{`5e15`, 5_000_000_000_000_000},
		{`1e16`, accounting.MaxTokens},
		{`-1`, 0},
		{`-9223372036854775808`, 0},
		{`-9223372036854775809`, 0},
	} {
		t.Run(tc.raw[:min(len(tc.raw), 30)], func(t *testing.T) {
			if got := TokenCount(gjson.Parse(tc.raw)); got != tc.want {
				t.Errorf("TokenCount: got %d, want %d", got, tc.want)
			}
			if got := TokenCountRaw([]byte(tc.raw)); got != tc.want {
				t.Errorf("TokenCountRaw: got %d, want %d", got, tc.want)
			}
		})
	}
}

// FuzzTokenCountRaw holds TokenCountRaw to TokenCount on gjson's reading
// of any well-formed JSON value.
func FuzzTokenCountRaw(f *testing.F) {
	for _, s := range []string{`0`, `123`, `-0`, `1e3`, `1.0`, `999999999999999999`, `9223372036854775808`, `"7"`, `null`, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if end, ok := ValueEnd(v, 0, MaxScanDepth); !ok || end != len(v) {
			return
		}
		if got, want := TokenCountRaw(v), TokenCount(gjson.Parse(View(v))); got != want {
			t.Fatalf("%q: TokenCountRaw got %d, TokenCount %d", v, got, want)
		}
	})
}
