package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// editPaths are the edits FuzzSetField makes: a field, one in an object
// that may be missing or null, one with an alias.
var editPaths = [][]string{{"max_tokens"}, {"stream_options", "include_usage"}, {"generationConfig", "maxOutputTokens"}}

// FuzzSetField holds SetField to setFieldReference, the edit as it was
// written first (gjson's own walk, encoding/json for every value and
// name), on every body CheckBody accepts: the same bytes or the same
// error, for every path and every kind of value the formats set.
func FuzzSetField(f *testing.F) {
	for _, b := range requestFixtures(f) {
		f.Add(b)
	}
	for _, b := range []string{
		`{}`, ` { } `, `{"model":"m"  }`, `{"max_t\u006fkens":null,"p":"` + strings.Repeat("x\\\"", 40) + `"}`,
		`{"stream_options":null}`, `{"stream_options":{"x":[1,{"y":"}"}]}}`, `{"stream_options":{"include_usage":false}}`,
		`{"generation_config":{"temperature":1}}`, `{"generation_config":null,"a":[]}`, `{"generationConfig":{"maxOutputTokens":null}}`,
		`{"stream_options":5}`, `{"stream_options":"x"}`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if CheckBody(body, editFields) != nil {
			return
		}
		for _, path := range editPaths {
			for _, value := range []any{true, false, int64(7), int64(-1), 7, "gpt-<4>&"} {
				got, err := SetField(body, editFields, value, path...)
				want, wantErr := setFieldReference(body, editFields, value, path...)
				if fmt.Sprint(err) != fmt.Sprint(wantErr) || string(got) != string(want) {
					t.Fatalf("%v = %#v: got %q, %v; want %q, %v", path, value, got, err, want, wantErr)
				}
			}
		}
	})
}

// setFieldReference is SetField as it was first written, before it read
// the body with ForEach and encoded flags, counts and names itself.
func setFieldReference(body []byte, fields *Fields, value any, path ...string) ([]byte, error) {
	enc, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("editing request body: %w", err)
	}
	if len(path) == 0 {
		return nil, fmt.Errorf("editing request body: no field named")
	}
	off := skipSpace(body, 0)
	if off >= len(body) || body[off] != '{' {
		return nil, fmt.Errorf("editing request body: %w", ErrNotObject)
	}
	obj := gjson.Parse(View(body[off:]))
	f := fields
	for _, name := range path {
		fd := f.declared(name)
		if fd == nil {
			return nil, fmt.Errorf("editing request body: field %q is not declared", name)
		}
		f = fd.inner
	}
	rank := 0
	for k := 0; ; k++ {
		name := path[k]
		fd := fields.declared(name)
		var found gjson.Result
		at, foundRank, members := -1, 0, false
		obj.ForEach(func(key, v gjson.Result) bool {
			members = true
			if r := fd.nameIndex(key.Str); r >= 0 {
				found, at, foundRank = v, off+v.Index, r
				return false
			}
			return true
		})
		switch {
		case at < 0:
			var member []byte
			if members {
				member = append(member, ',')
			}
			member = appendMemberReference(member, fields, path[k:], rank, enc)
			brace := off + len(strings.TrimRight(obj.Raw, " \t\r\n")) - 1
			return splice(nil, body, brace, brace, member), nil
		case k == len(path)-1:
			return splice(nil, body, at, at+len(found.Raw), enc), nil
		case found.Type == gjson.Null:
			inner := append([]byte{'{'}, appendMemberReference(nil, fd.inner, path[k+1:], foundRank, enc)...)
			return splice(nil, body, at, at+len(found.Raw), append(inner, '}')), nil
		case !found.IsObject():
			return nil, fmt.Errorf("editing request body: %s is not an object", name)
		}
		obj, off, fields, rank = gjson.Parse(found.Raw), at, fd.inner, foundRank
	}
}

func appendMemberReference(out []byte, fields *Fields, path []string, rank int, enc []byte) []byte {
	fd := fields.declared(path[0])
	name, _ := json.Marshal(fd.names[min(rank, len(fd.names)-1)])
	out = append(append(out, name...), ':')
	if len(path) == 1 {
		return append(out, enc...)
	}
	out = append(out, '{')
	return append(appendMemberReference(out, fd.inner, path[1:], rank, enc), '}')
}

// TestSplice places the body and the buffer at every pair of offsets in
// one array, so that the buffer begins where the body does (an earlier
// edit's output: edited in place), overlaps it elsewhere, or lies apart,
// with capacities too small and large enough, and makes edits that
// shrink, keep and grow the body. The result must be the edit, and the
// body untouched unless it was edited in place.
func TestSplice(t *testing.T) {
	src := []byte(`{"a":1,"bb":[1,2,3],"c":"xyz"}`)
	inserts := [][]byte{nil, []byte("Q"), []byte("QQQQQQQQQQQQQQQQQQQQ")}
	for bodyAt := 0; bodyAt < 40; bodyAt++ {
		for bufAt := 0; bufAt < 40; bufAt++ {
			for room := 0; room < 80; room += 7 {
				for from := 0; from <= len(src); from += 5 {
					for to := from; to <= len(src); to += 6 {
						for _, insert := range inserts {
							array := bytes.Repeat([]byte{'#'}, 200)
							body := array[bodyAt : bodyAt+len(src)]
							copy(body, src)
							buf := array[bufAt : bufAt : bufAt+room]
							want := string(src[:from]) + string(insert) + string(src[to:])
							if got := splice(buf, body, from, to, insert); string(got) != want {
								t.Fatalf("body at %d, buffer at %d with room for %d, [%d:%d] = %q: got %q, want %q",
									bodyAt, bufAt, room, from, to, insert, got, want)
							}
							if bodyAt != bufAt && !bytes.Equal(array[bodyAt:bodyAt+len(src)], src) {
								t.Fatalf("body at %d, buffer at %d with room for %d, [%d:%d] = %q: the body changed to %q",
									bodyAt, bufAt, room, from, to, insert, array[bodyAt:bodyAt+len(src)])
							}
						}
					}
				}
			}
		}
	}
}
