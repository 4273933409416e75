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

// FuzzExactReaders holds StringEnd, NumberEnd and ValueChecker to
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
		var vc ValueChecker
		end, ok := vc.Check(b, 0, 1, nil)
		if got := ok && end == whole; got != want {
			t.Fatalf("ValueChecker.Check(%q): got end %d, %v; want whole %v", v, end, ok, want)
		}
		// Against declared fields, as the check reads a declared
		// member's value.
		wantDeclared := CheckBody([]byte(`{"messages":`+v+`}`), checkFields) == nil
		if end, ok := vc.Check(b, 0, 1, checkFields.Inner("messages")); (ok && end == whole) != wantDeclared {
			t.Fatalf("ValueChecker.Check(%q, messages' fields): got end %d, %v; want whole %v", v, end, ok, wantDeclared)
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

// TestValueCheckerEnd: a value inside a body ends where its member does,
// and the same checker reads one value after another.
func TestValueCheckerEnd(t *testing.T) {
	body := []byte(`{"a":{"b":[1,"x"]},"c":2}`)
	var vc ValueChecker
	if end, ok := vc.Check(body, 5, 1, nil); !ok || end != 18 {
		t.Errorf("got end %d, %v; want 18, true", end, ok)
	}
	if end, ok := vc.Check(body, 23, 1, nil); !ok || end != 24 {
		t.Errorf("got end %d, %v; want 24, true", end, ok)
	}
}

// TestValueCheckerFields: a value is read against the fields given, as
// the check reads a declared member's: a field of them in another case
// is refused, and the same value is accepted with no fields.
func TestValueCheckerFields(t *testing.T) {
	value := []byte(`[{"ROLE":"user"}]`)
	var vc ValueChecker
	if _, ok := vc.Check(value, 0, 1, checkFields.Inner("messages")); ok {
		t.Error("against messages' fields: got ok, want the case variant refused")
	}
	if end, ok := vc.Check(value, 0, 1, nil); !ok || end != len(value) {
		t.Errorf("with no fields: got end %d, %v; want %d, true", end, ok, len(value))
	}
}
