package llm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// eachCases are bodies whose values end in every way ForEach finds an
// end: short and long strings, escapes next to quotes and at word
// boundaries, nested and empty containers, every literal and number.
var eachCases = []string{
	`{}`,
	`[]`,
	` { "a" : 1 , "b" : [ ] , "c" : { } } `,
	`{"role":"user","content":"What does the AMF do when a UE registers?"}`,
	`{"a":"","b":"x","c":"1234567","d":"12345678","e":"123456789abcdefghijklmnopqrstuvwxyz"}`,
	`{"a":"\"","b":"\\","c":"abc\\\"def","d":"1234567\"","e":"12345678\\\\","f":"abcdefghijklmnopqrstuvwxyz0123\"\\"}`,
	`{"k\u0065y":"v\u00e9","\n":"\ud83d\ude00","x\\":"y\/"}`,
	`[1,-0,2.5e10,-1E-3,0.0,123456789012345678901234567890,true,false,null]`,
	`{"a":[{"b":{"c":[1,{"d":"}]{["}]}}],"e":"]"}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:,"}}]}],"n":2}`,
	"{\"a\":\"" + strings.Repeat("long text with \\\"quotes\\\" ", 20) + "\",\"b\":[\"" + strings.Repeat("x", 100) + "\"]}",
	"[\"\\\\\",\"\\\\\\\\\",\"" + strings.Repeat("\\\\", 30) + "\"]",
	`{"漢字":"かな","e":"é"}`,
}

// TestForEach: on valid JSON, ForEach yields what gjson's ForEach
// yields, at every depth.
func TestForEach(t *testing.T) {
	for _, c := range eachCases {
		if err := CheckBody([]byte(`{"x":`+c+`}`), nil); err != nil {
			t.Fatalf("%s: not a valid case: %v", c, err)
		}
		if diff := compareEach(gjson.Parse(c), 0); diff != "" {
			t.Errorf("%s: %s", c, diff)
		}
	}
}

// TestForEachStops: fn returning false ends the walk, as in gjson.
func TestForEachStops(t *testing.T) {
	n := 0
	ForEach(gjson.Parse(`[1,2,3]`), func(_, _ gjson.Result) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("got %d calls, want 2", n)
	}
}

// FuzzForEach holds ForEach to gjson's ForEach on every body CheckBody
// accepts, and to reading within its input, without panicking, on every
// other.
func FuzzForEach(f *testing.F) {
	for _, c := range eachCases {
		f.Add([]byte(c))
	}
	for _, b := range requestFixtures(f) {
		f.Add(b)
	}
	for _, s := range []string{`{"a":"\"}`, `{"a":[1,2`, `[{"a"`, `{"a" 1}`, `["abc`, `[tru]`, `{"a":nul}`, `[-]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// Any JSON value, not only objects: wrap it to check it.
		if CheckBody(append(append([]byte(`{"x":`), body...), '}'), nil) != nil {
			// Malformed: ForEach must only not panic.
			var walk func(v gjson.Result, depth int)
			walk = func(v gjson.Result, depth int) {
				if depth > 8 {
					return
				}
				ForEach(v, func(_, v gjson.Result) bool {
					walk(v, depth+1)
					return true
				})
			}
			walk(gjson.Result{Type: gjson.JSON, Raw: string(body)}, 0)
			return
		}
		if diff := compareEach(gjson.ParseBytes(body), 0); diff != "" {
			t.Fatal(diff)
		}
	})
}

// compareEach compares ForEach with gjson's ForEach over v and,
// recursively, over every value inside it.
func compareEach(v gjson.Result, depth int) string {
	type member struct{ k, v gjson.Result }
	var want, got []member
	v.ForEach(func(k, v gjson.Result) bool { want = append(want, member{k, v}); return true })
	ForEach(v, func(k, v gjson.Result) bool { got = append(got, member{k, v}); return true })
	if len(got) != len(want) {
		return fmt.Sprintf("%q: got %d members, want %d", v.Raw, len(got), len(want))
	}
	for i := range got {
		if d := diffResult(got[i].k, want[i].k); d != "" {
			return fmt.Sprintf("%q: key %d: %s", v.Raw, i, d)
		}
		if d := diffResult(got[i].v, want[i].v); d != "" {
			return fmt.Sprintf("%q: value %d: %s", v.Raw, i, d)
		}
		if got[i].v.Type == gjson.JSON && depth < MaxDepth {
			if d := compareEach(got[i].v, depth+1); d != "" {
				return d
			}
		}
	}
	return ""
}

func diffResult(got, want gjson.Result) string {
	if got.Type != want.Type || got.Raw != want.Raw || got.Str != want.Str || got.Index != want.Index ||
		!(got.Num == want.Num || got.Num != got.Num && want.Num != want.Num) {
		return fmt.Sprintf("got %+v, want %+v", got, want)
	}
	return ""
}
