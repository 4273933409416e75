package llm

import "testing"

func TestCleanPath(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{"plain", "/v1/chat/completions", "/v1/chat/completions"},
		{"query", "/v1/chat/completions?api-version=1", "/v1/chat/completions"},
		{"fragment", "/v1/chat/completions#x", "/v1/chat/completions"},
		{"trailing slash", "/v1/chat/completions/", "/v1/chat/completions"},
		{"repeated slashes", "//v1//chat/completions", "/v1/chat/completions"},
		{"dot segments", "/v1/x/../chat/./completions", "/v1/chat/completions"},
		{"escaped colon", "/v1beta/models/gemini-2.0-flash%3AgenerateContent", "/v1beta/models/gemini-2.0-flash:generateContent"},
		{"lower-case escape", "/v1beta/models/m%3agenerateContent", "/v1beta/models/m:generateContent"},
		{"escaped slash", "/v1/chat%2Fcompletions", "/v1/chat/completions"},
		{"escaped dot segment", "/v1/x/%2E%2E/chat/completions", "/v1/chat/completions"},
		{"decoded once", "/v1beta/models/m%253AgenerateContent", "/v1beta/models/m%3AgenerateContent"},
		{"escaped query mark stays in the path", "/v1/chat/completions%3F", "/v1/chat/completions?"},
		{"invalid escapes kept", "/a/%zz/%4", "/a/%zz/%4"},
		{"no leading slash", "v1/chat/completions", "/v1/chat/completions"},
		{"empty", "", "/"},
		{"root", "/", "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CleanPath(tt.raw); got != tt.want {
				t.Errorf("CleanPath(%q): got %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}

func TestCleanPathNoAllocations(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() { _ = CleanPath("/v1/chat/completions?x=1") })
	if allocs != 0 {
		t.Errorf("got %v allocations for a path with nothing to clean, want 0", allocs)
	}
}

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/v1/chat/completions", "/a/%3A/../b//c/", "%", "/%zz", "?x", "/./.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p := CleanPath(raw)
		if p == "" || p[0] != '/' {
			t.Fatalf("CleanPath(%q) = %q: not absolute", raw, p)
		}
		if len(p) > 1 && p[len(p)-1] == '/' {
			t.Fatalf("CleanPath(%q) = %q: trailing slash", raw, p)
		}
	})
}
