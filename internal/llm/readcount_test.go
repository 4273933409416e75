package llm

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// TestReadCount: a count is read only when it is unambiguously a
// non-negative JSON integer, by ReadCount from gjson's value and by
// ReadCountRaw from the raw bytes alike.
func TestReadCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  string
		want int64
		ok   bool
	}{
		{"zero", `0`, 0, true},
		{"a count", `100`, 100, true},
		{"the longest plain count", `999999999999999999`, accounting.MaxTokens, true},
		{"past int64", `9223372036854775808`, accounting.MaxTokens, true},
		{"400 digits", strings.Repeat("9", 400), accounting.MaxTokens, true},
		{"an exponent", `1e3`, 1000, true},
		{"an exponent past float64", `1e400`, accounting.MaxTokens, true},
		{"a zero fraction", `12.0`, 12, true},
		{"an exponent that makes an integer", `1.5E2`, 150, true},
		{"zero with an exponent", `0e5`, 0, true},
		{"a fraction", `12.5`, 0, false},
		{"a fraction below one", `0.9`, 0, false},
		{"an exponent that makes an integer below one", `10e-1`, 1, true},
		{"an exponent that makes a fraction", `5e-1`, 0, false},
		{"an exponent below float64", `1e-400`, 0, false},
		{"negative zero", `-0`, 0, false},
		{"a negative", `-5`, 0, false},
		{"a leading zero", `00`, 0, false},
		{"a leading zero then digits", `012`, 0, false},
		{"a plus sign", `+100`, 0, false},
		{"a bare fraction", `.5`, 0, false},
		{"a trailing dot", `5.`, 0, false},
		{"an exponent without digits", `5e`, 0, false},
		{"a string", `"100"`, 0, false},
		{"true", `true`, 0, false},
		{"null", `null`, 0, false},
		{"an object", `{"a":1}`, 0, false},
		{"an array", `[1]`, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n, ok := ReadCountRaw([]byte(tc.raw)); n != tc.want || ok != tc.ok {
				t.Errorf("ReadCountRaw(%s): got %d %v, want %d %v", tc.raw, n, ok, tc.want, tc.ok)
			}
			// gjson reads some malformed numbers as others (.5 as 5): its
			// reading is held to the raw one where its Raw is the value.
			v := gjson.Parse(tc.raw)
			if v.Raw != tc.raw {
				return
			}
			if n, ok := ReadCount(v); n != tc.want || ok != tc.ok {
				t.Errorf("ReadCount(%s): got %d %v, want %d %v", tc.raw, n, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzReadCountRaw holds ReadCountRaw to ReadCount on gjson's reading of
// any well-formed JSON value, and every count it reads within
// 0..accounting.MaxTokens.
func FuzzReadCountRaw(f *testing.F) {
	for _, s := range []string{`0`, `123`, `-0`, `1e3`, `1.0`, `1.5`, `00`, `999999999999999999`, `9223372036854775808`, `"7"`, `null`, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		n, ok := ReadCountRaw(v)
		if n < 0 || n > accounting.MaxTokens || !ok && n != 0 {
			t.Fatalf("%q: ReadCountRaw got %d %v", v, n, ok)
		}
		if end, wf := ValueEnd(v, 0, MaxScanDepth); !wf || end != len(v) {
			return
		}
		if gn, gok := ReadCount(gjson.Parse(View(v))); gn != n || gok != ok {
			t.Fatalf("%q: ReadCountRaw got %d %v, ReadCount %d %v", v, n, ok, gn, gok)
		}
	})
}
