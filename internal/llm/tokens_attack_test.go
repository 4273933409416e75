package llm

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// Attacks on ReadCountRaw, the fast path of the streamed usage readers'
// counts: numbers at the edges of plainCount's digits-only reading (its
// length bound, int64's, the clamp at accounting.MaxTokens) and every
// other form JSON allows, each read as ReadCount reads gjson's value: a
// readable count as TokenCount reads it, and a negative count, a
// fraction or a leading zero not at all (want -1).
func TestReadCountRawAttacks(t *testing.T) {
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
		{`0000000000000000012`, -1}, // 19 digits, past plainCount, a leading zero
		{`000000000000000012`, -1},
		{`9223372036854775807`, accounting.MaxTokens},
		{`9223372036854775808`, accounting.MaxTokens},
		{`18446744073709551616`, accounting.MaxTokens},
		{strings.Repeat("9", 400), accounting.MaxTokens},
		{"-" + strings.Repeat("9", 400), -1},
		{"0." + strings.Repeat("9", 400), 1}, // a float64 rounds it to 1
		{`0.99999999999999999`, 1},           // a float64 rounds it to 1
		{`-0`, -1},
		{`-0.0`, -1},
		{`-0e5`, -1},
		{`0e0`, 0},
		{`1e0`, 1},
		{`1e-400`, -1},
		{`10e-1`, 1},
		{`12.999`, -1},
		{`1.5E2`, 150},
		{`5e15`, 5_000_000_000_000_000},
		{`1e16`, accounting.MaxTokens},
		{`-1`, -1},
		{`-9223372036854775808`, -1},
		{`-9223372036854775809`, -1},
	} {
		t.Run(tc.raw[:min(len(tc.raw), 30)], func(t *testing.T) {
			want, wantOK := max(tc.want, 0), tc.want >= 0
			if got, ok := ReadCount(gjson.Parse(tc.raw)); got != want || ok != wantOK {
				t.Errorf("ReadCount: got %d %v, want %d %v", got, ok, want, wantOK)
			}
			if got, ok := ReadCountRaw([]byte(tc.raw)); got != want || ok != wantOK {
				t.Errorf("ReadCountRaw: got %d %v, want %d %v", got, ok, want, wantOK)
			}
		})
	}
}
