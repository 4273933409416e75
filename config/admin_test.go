package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdminTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name      string
		path      string // "" leaves the key out
		wantToken string
		wantErr   string // part of the error; "" for none
	}{
		{"none", "", "", ""},
		{"good, with a trailing newline", write("good", good+"\n"), good, ""},
		{"missing", filepath.Join(dir, "missing"), "", "admin_token_file: open"},
		{"empty", write("empty", "\n"), "", "at least 16 bytes"},
		{"too short", write("short", "secret-ish"), "", "at least 16 bytes"},
		{"too long", write("long", strings.Repeat("a", MaxAdminTokenBytes+1)), "", "at most 4096 bytes"},
		{"a space inside", write("space", "0123456789 abcdef-secret"), "", "printable ASCII"},
		{"not ASCII", write("utf8", "0123456789abcdéf-secret"), "", "printable ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := "limits: []\n"
			if tt.path != "" {
				data += "admin_token_file: " + tt.path + "\n"
			}
			c, err := Parse([]byte(data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("the error quotes the file's content: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.AdminToken != tt.wantToken || c.AdminTokenFile != tt.path {
				t.Errorf("got token %q from %q, want %q from %q", c.AdminToken, c.AdminTokenFile, tt.wantToken, tt.path)
			}
		})
	}
}
