package llm

import (
	"slices"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
)

func TestOptionDefaults(t *testing.T) {
	if got := (ReaderOptions{}).BufferSize(); got != DefaultMaxBuffer {
		t.Errorf("got buffer %d, want %d", got, DefaultMaxBuffer)
	}
	if got := (ReaderOptions{MaxBuffer: 9}).BufferSize(); got != 9 {
		t.Errorf("got buffer %d, want 9", got)
	}
	if got := (ReaderOptions{}).TokenCounter(); got != (accounting.Approximate{}) {
		t.Errorf("got counter %v, want the approximate one", got)
	}
	c := accounting.Approximate{CharsPerToken: 2}
	if got := (ParseOptions{Counter: c}).TokenCounter(); got != c {
		t.Errorf("got counter %v, want %v", got, c)
	}
	if got := (ParseOptions{}).TokenCounter(); got != (accounting.Approximate{}) {
		t.Errorf("got counter %v, want the approximate one", got)
	}
}

func TestAppendNote(t *testing.T) {
	var notes []string
	for _, n := range []string{"a", "b", "a"} {
		notes = AppendNote(notes, n)
	}
	if want := []string{"a", "b"}; !slices.Equal(notes, want) {
		t.Errorf("got %q, want %q", notes, want)
	}
}
