package llm

import (
	"mime"
	"testing"
)

func TestIsEventStream(t *testing.T) {
	tests := []struct {
		contentType string
		want        bool
	}{
		{"text/event-stream", true},
		{"text/event-stream; charset=utf-8", true},
		{"Text/Event-Stream", true},
		{"application/json", false},
		{"text/event-stream;;", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := IsEventStream(tc.contentType); got != tc.want {
			t.Errorf("IsEventStream(%q): got %v, want %v", tc.contentType, got, tc.want)
		}
	}
	if !HasMediaType("application/vnd.amazon.eventstream", "application/vnd.amazon.eventstream") {
		t.Error("got false for an exact media type, want true")
	}
}

// FuzzPlainMediaType: the values the fast path reads, it reads as
// mime.ParseMediaType does.
func FuzzPlainMediaType(f *testing.F) {
	for _, s := range []string{"text/event-stream", "application/json; charset=utf-8", "application/vnd.amazon.eventstream",
		"text/plain;charset=utf-8", "a/b/c", "/json", "text/", "Text/Plain", "application/x-ndjson; charset=utf-8; x=y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		mt, ok := plainMediaType(ct)
		if !ok {
			return
		}
		want, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != want {
			t.Errorf("%q: got %q, ParseMediaType reads %q (%v)", ct, mt, want, err)
		}
	})
}

func TestMediaTypeAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		_ = IsEventStream("text/event-stream; charset=utf-8")
		_ = IsEventStream("application/json")
	}); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}
