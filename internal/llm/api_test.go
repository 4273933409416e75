package llm

import (
	"slices"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

func TestOptionDefaults(t *testing.T) {
	if got := (ReaderOptions{}).BufferSize(); got != DefaultMaxBuffer {
		t.Errorf("got buffer %d, want %d", got, DefaultMaxBuffer)
	}
	if got := (ReaderOptions{MaxBuffer: 9}).BufferSize(); got != 9 {
		t.Errorf("got buffer %d, want 9", got)
	}
	// One default for every format: the calibrated tokenizer, the one
	// the server starts with.
	if got := (ReaderOptions{}).TokenCounter(); got != Counter(tokenizer.Default()) {
		t.Errorf("got reader counter %v, want tokenizer.Default()", got)
	}
	if got := (ParseOptions{}).TokenCounter(); got != Counter(tokenizer.Default()) {
		t.Errorf("got parse counter %v, want tokenizer.Default()", got)
	}
	c, err := tokenizer.New(tokenizer.Config{CharsPerToken: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := (ParseOptions{Counter: c}).TokenCounter(); got != Counter(c) {
		t.Errorf("got counter %v, want the one set", got)
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
