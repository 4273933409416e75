package tokenizer

import (
	"testing"
)

func TestFileTokens(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	pdf := []byte("%PDF-1.7\n1 0 obj << /Type /Pages /Count 3 >>\n2 0 obj << /Type /Page >>\n3 0 obj <</Type/Page>>\n4 0 obj << /Type\n/Page /Parent 1 0 R >>")
	tests := []struct {
		name string
		data []byte
		want int64
	}{
		{"file_id only", nil, UnknownFileTokens},
		{"PDF pages", pdf, 3 * FilePageTokens},
		{"PDF with compressed page objects: by size", append([]byte("%PDF-1.7\n"), make([]byte, 120<<10)...), 2 * FilePageTokens},
		{"text file", []byte("hello world"), c.CountTokens("gpt-4o", "hello world")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FileTokens(c, "gpt-4o", tt.data); got != tt.want {
				t.Errorf("FileTokens = %d, want %d", got, tt.want)
			}
		})
	}
}
