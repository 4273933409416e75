package llm

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenwarden/tokenwarden/accounting"
)

func TestTokenCount(t *testing.T) {
	tests := []struct {
		raw  string
		want int64
	}{
		{`123`, 123},
		{`0`, 0},
		{`-0`, 0},
		{`-5`, 0},
		{`7.9`, 7},
		{`0.5`, 0},
		{`1e3`, 1000},
		{`1E+3`, 1000},
		{`1e30`, accounting.MaxTokens},
		{`1.5e308`, accounting.MaxTokens},
		{`1e400`, accounting.MaxTokens},
		{`-1e400`, 0},
		{`9223372036854775807`, accounting.MaxTokens},
		{`9223372036854775808`, accounting.MaxTokens},
		{`-9223372036854775809`, 0},
		{`9007199254740992`, accounting.MaxTokens},
		{`9007199254740993`, accounting.MaxTokens},
		{`9007199254740991`, accounting.MaxTokens - 1},
		{`999999999999999999`, accounting.MaxTokens},
		{`000012`, 12},
		{`412`, 412},
		{`null`, 0},
		{`"12"`, 0},
		{`true`, 0},
		{`{"n":1}`, 0},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			if got := TokenCount(gjson.Parse(tc.raw)); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
	if got := TokenCount(gjson.Result{}); got != 0 {
		t.Errorf("absent: got %d, want 0", got)
	}
}
