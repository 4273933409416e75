package llm

import (
	"strings"
	"testing"
)

// exactValues are values for FuzzExactReaders: each kind, and faults in
// each.
var exactValues = []string{
	`"plain"`, `"esc\"aped\\ \u00e9 \ud83d\ude00"`, `"é漢字"`, `""`, `"\x"`, `"\u12"`, "\"\x01\"", "\"\xff\"", `"open`,
	`0`, `-0`, `1.5e+3`, `01`, `1.`, `-`, `1e`, `12345678901234567890`,
	`true`, `false`, `null`, `nul`,
	`{}`, `[]`, `{"a":1,"A":2}`, `{"a":{"b":[1,2,{"c":null}]}}`, `[1,[2,[3]]]`, `{"a":1,}`, `[1 2]`, `{"\u212a":1,"k":2}`,
	strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1),
	strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
}

// FuzzExactReaders holds StringEnd, NumberEnd and CheckValue to
// CheckBody: each reads a whole value exactly when CheckBody accepts it
// as the value of a member of an object.
func FuzzExactReaders(f *testing.F) {
	for _, v := range exactValues {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if skipSpace([]byte(v), 0) != 0 {
			return // the readers read a value where it starts
		}
		b := []byte(v)
		want := CheckBody([]byte(`{"member":`+v+`}`), nil) == nil
		// A whole value is one that ends where the space after it, if
		// any, begins.
		whole := len(strings.TrimRight(v, " \t\r\n"))
		end, ok := CheckValue(b, 0, 1)
		if got := ok && end == whole; got != want {
			t.Fatalf("CheckValue(%q): got end %d, %v; want whole %v", v, end, ok, want)
		}
		if len(b) > 0 && b[0] == '"' {
			end, _, ok := StringEnd(b, 0)
			if got := ok && end == whole; got != want {
				t.Fatalf("StringEnd(%q): got end %d, %v; want whole %v", v, end, ok, want)
			}
		}
		if len(b) > 0 && (b[0] == '-' || '0' <= b[0] && b[0] <= '9') {
			end, ok := NumberEnd(b, 0)
			if got := ok && end == whole; got != want {
				t.Fatalf("NumberEnd(%q): got end %d, %v; want whole %v", v, end, ok, want)
			}
		}
	})
}

// TestCheckValueEnd: a value inside a body ends where its member does.
func TestCheckValueEnd(t *testing.T) {
	body := []byte(`{"a":{"b":[1,"x"]},"c":2}`)
	if end, ok := CheckValue(body, 5, 1); !ok || end != 18 {
		t.Errorf("got end %d, %v; want 18, true", end, ok)
	}
	if end, ok := CheckValue(body, 23, 1); !ok || end != 24 {
		t.Errorf("got end %d, %v; want 24, true", end, ok)
	}
}
