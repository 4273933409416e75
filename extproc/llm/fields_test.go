package llm

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestTopFields(t *testing.T) {
	doc := gjson.Parse(`{"a":1,"nested":{"b":2},"b":3,"a":4}`)
	got := TopFields(doc, "a", "b", "missing")
	if len(got) != 3 {
		t.Fatalf("got %d results, want 3", len(got))
	}
	// The first of a repeated key wins, as with gjson.Get; a nested key
	// is not a top-level one.
	if got[0].Raw != "1" || got[1].Raw != "3" || got[2].Exists() {
		t.Errorf("got a=%s b=%s missing=%s, want 1, 3 and nothing", got[0].Raw, got[1].Raw, got[2].Raw)
	}
}

func TestSetField(t *testing.T) {
	body := []byte(`{"model":"m",  "cfg":{"t":1}}`)
	out, err := SetField(body, "cfg.max", 7)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"m",  "cfg":{"t":1,"max":7}}`; string(out) != want {
		t.Errorf("got %s, want %s (the rest kept byte for byte)", out, want)
	}
	// A value JSON cannot hold fails the edit.
	if _, err := SetField(body, "x", make(chan int)); err == nil || !strings.HasPrefix(err.Error(), "editing request body: ") {
		t.Errorf("got error %v, want one that says the edit failed", err)
	}
}
