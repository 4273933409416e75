package llm

import (
	"strings"
	"testing"
)

func TestNewPathRequest(t *testing.T) {
	fromPath := func(path string) (string, bool, bool) {
		model, stream, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		return model, stream == "stream", ok && model != ""
	}
	fields := NewFields().Read("max")
	req, _, err := NewPathRequest("/m1/stream", []byte(` {}`), fields, fromPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Request{Model: "m1", Stream: true, StreamUsage: true, Choices: 1}); req != want {
		t.Errorf("got %+v, want %+v", req, want)
	}
	if _, _, err := NewPathRequest("/nothing", []byte(`{}`), fields, fromPath, nil); err == nil || !strings.Contains(err.Error(), "does not name a model") {
		t.Errorf("got error %v, want one saying the path names no model", err)
	}
	if _, _, err := NewPathRequest("/m1/x", []byte(`[]`), fields, fromPath, nil); err != ErrNotObject {
		t.Errorf("got error %v, want %v", err, ErrNotObject)
	}
	// The body is checked against the fields.
	if _, _, err := NewPathRequest("/m1/x", []byte(`{"MAX":1}`), fields, fromPath, nil); err == nil || !strings.Contains(err.Error(), `"max" in another case`) {
		t.Errorf("got error %v, want one naming the field", err)
	}
}
