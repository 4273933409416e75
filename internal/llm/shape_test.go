package llm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// scanShape checks body against fields with a Scan and returns its Shape
// and verdict.
func scanShape(body []byte, fields *Fields) (Shape, error) {
	var s Scan
	s.Start(body, fields)
	for s.Next() {
	}
	return s.Shape(), s.Err()
}

// TestShapeSetField: an edit informed by the check's Shape is SetField's,
// and the Shape goes on describing the edited body only when the edit
// added a top-level field the body lacked, which is the edit it makes
// without reading the body.
func TestShapeSetField(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		path       []string
		fast       bool // the Shape made the edit, and describes the result
	}{
		{"absent, after members", `{"model":"m","stream":true}`, []string{"stream_options", "include_usage"}, true},
		{"absent, empty object", `{}`, []string{"stream_options", "include_usage"}, true},
		{"absent, spaces around", " \t{ \"model\" : \"m\" } \r\n", []string{"max_tokens"}, true},
		{"absent, named inside another member", `{"metadata":{"stream_options":1},"x":"stream_options"}`, []string{"stream_options", "include_usage"}, true},
		{"absent, an alias's object", `{"model":"m"}`, []string{"generationConfig", "maxOutputTokens"}, true},
		{"present", `{"stream_options":{"include_usage":false}}`, []string{"stream_options", "include_usage"}, false},
		{"present as null", `{"stream_options":null}`, []string{"stream_options", "include_usage"}, false},
		{"present, escaped", `{"stream_opti\u006fns":{}}`, []string{"stream_options", "include_usage"}, false},
		{"present under an alias", `{"generation_config":{}}`, []string{"generationConfig", "maxOutputTokens"}, false},
		{"undeclared", `{}`, []string{"stream_options", "nope"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			sh, err := scanShape(body, editFields)
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			want, wantErr := SetField(body, editFields, true, tc.path...)
			got, gotErr := sh.SetField(nil, body, editFields, true, tc.path...)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || string(got) != string(want) {
				t.Fatalf("got %q, %v; want %q, %v", got, gotErr, want, wantErr)
			}
			if fast := sh != (Shape{}); fast != tc.fast {
				t.Fatalf("got a Shape after the edit %v, want %v", fast, tc.fast)
			}
			if tc.fast {
				if after := ShapeOf(got, editFields); sh != after {
					t.Fatalf("got Shape %+v after the edit, want the edited body's, %+v", sh, after)
				}
			}
		})
	}
}

// TestShapeOtherBody: a Shape used on a body other than its own (longer,
// or with its closing brace elsewhere) leaves the edit to SetField.
func TestShapeOtherBody(t *testing.T) {
	sh, err := scanShape([]byte(`{"model":"m"}`), editFields)
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{`{"model":"mm"}`, `{"model":1}  `, `{"stream_options":{}}`[:13]} {
		s := sh
		body := []byte(other)
		got, gotErr := s.SetField(nil, body, editFields, true, "max_tokens")
		want, wantErr := SetField(body, editFields, true, "max_tokens")
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || string(got) != string(want) {
			t.Errorf("%s: got %q, %v; want %q, %v", other, got, gotErr, want, wantErr)
		}
		if s != (Shape{}) {
			t.Errorf("%s: got Shape %+v after the edit, want none", other, s)
		}
	}
}

// FuzzShapeSetField holds the edits a Shape makes to SetField's on every
// body the check accepts: the same bytes or the same error, for every
// path and value FuzzSetField edits, one edit after another as Inject
// makes them, and after a model edit that keeps the body's length (a
// downgrade to a model named as long). The Scan's Shape is ShapeOf's.
func FuzzShapeSetField(f *testing.F) {
	for _, b := range requestFixtures(f) {
		f.Add(b)
	}
	for _, b := range []string{
		`{}`, ` { } `, `{"model":"m"  }`, `{"max_t\u006fkens":null,"p":"` + strings.Repeat("x\\\"", 40) + `"}`,
		`{"stream_options":null}`, `{"stream_options":{"x":[1,{"y":"}"}]}}`, `{"stream_options":{"include_usage":false}}`,
		`{"generation_config":{"temperature":1}}`, `{"generation_config":null,"a":[]}`, `{"generationConfig":{"maxOutputTokens":null}}`,
		`{"stream_options":5}`, `{"stream_options":"x"}`, `{"model":"gpt-4o","stream":true,"max_tokens":9,"messages":[]}` + "\n",
		`{"model":"abc"}`, `{"a":"stream_options","b":{"max_tokens":1}}`, `[]`, `{"model":`,
	} {
		f.Add([]byte(b))
	}
	values := []any{true, false, int64(7), int64(-1), 7, "gpt-<4>&"}
	f.Fuzz(func(t *testing.T, body []byte) {
		sh, err := scanShape(body, editFields)
		if err != nil {
			if sh != (Shape{}) {
				t.Fatalf("got Shape %+v for a body the check refuses, want none", sh)
			}
			return
		}
		if of := ShapeOf(body, editFields); sh != of {
			t.Fatalf("Scan's Shape is %+v, ShapeOf's %+v", sh, of)
		}
		// A model named as long as the body's, for a downgrade's edit.
		var model []byte
		if m, err := SetField(body, editFields, "abc", "model"); err == nil && len(m) == len(body) {
			if model, err = SetField(body, editFields, "xyz", "model"); err != nil {
				t.Fatal(err)
			}
		}
		for _, first := range editPaths {
			for _, second := range editPaths {
				for _, value := range values {
					// Both edits into one buffer, as Inject makes
					// them, filled with marks that show in a body
					// that takes bytes it should not: none, one too
					// small for either edit, one that holds a short
					// first edit but not the second, and one that
					// holds both, the second then made in place.
					for _, room := range []int{0, 4, len(body) + 12, len(body) + 200} {
						buf := bytes.Repeat([]byte{'#'}, room)
						s := sh
						got, err := s.SetField(buf, body, editFields, value, first...)
						want, wantErr := SetField(body, editFields, value, first...)
						if fmt.Sprint(err) != fmt.Sprint(wantErr) || string(got) != string(want) {
							t.Fatalf("%v = %#v, %d bytes of room: got %q, %v; want %q, %v", first, value, room, got, err, want, wantErr)
						}
						if err != nil {
							continue
						}
						got, err = s.SetField(buf, got, editFields, true, second...)
						want, wantErr = SetField(want, editFields, true, second...)
						if fmt.Sprint(err) != fmt.Sprint(wantErr) || string(got) != string(want) {
							t.Fatalf("%v = %#v, then %v, %d bytes of room: got %q, %v; want %q, %v", first, value, second, room, got, err, want, wantErr)
						}
					}
				}
			}
			if model != nil {
				s := sh
				got, err := s.SetField(nil, model, editFields, true, first...)
				want, wantErr := SetField(model, editFields, true, first...)
				if fmt.Sprint(err) != fmt.Sprint(wantErr) || string(got) != string(want) {
					t.Fatalf("after a model edit, %v: got %q, %v; want %q, %v", first, got, err, want, wantErr)
				}
			}
		}
	})
}
