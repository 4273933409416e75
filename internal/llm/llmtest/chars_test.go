package llmtest

import "testing"

func TestChars(t *testing.T) {
	c := Chars{PerToken: 4}
	tests := []struct {
		text string
		want int64
	}{
		{"", 0},
		{"abcd", 1},
		{"abcde", 2},
		{"你好世界", 4},
		{"\xff\xfe", 2}, // invalid bytes are charged, never free
	}
	for _, tt := range tests {
		if got := c.CountTokens("m", tt.text); got != tt.want {
			t.Errorf("CountTokens(%q): got %d, want %d", tt.text, got, tt.want)
		}
	}
}
