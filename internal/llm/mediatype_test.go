package llm

import "testing"

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
