package llm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// scanBlock is a visited content block that holds content blocks, so
// that visited objects nest as deeply as a body does.
var scanBlock = NewFields().Read("type", "text").Visit()

func init() { scanBlock.Nest("content", scanBlock) }

// scanFields are the fields the Scan tests visit: the messages and their
// content blocks, at any depth, and an options object that is not
// visited.
var scanFields = NewFields().Read("model", "stream").
	Nest("options", NewFields().Read("a", "b")).
	Nest("messages", NewFields().Read("role", "name").Nest("content", scanBlock).Visit())

// scanNames are the top-level fields the Scan tests ask for.
var scanNames = []string{"model", "messages", "stream", "options", "missing"}

// scanCases are bodies with visited objects and arrays of every shape:
// empty, nested, escaped, interleaved with what is not visited.
var scanCases = []string{
	`{}`,
	`{"model":"m","messages":[]}`,
	`{"messages":[{}],"model":"m"}`,
	`{"messages":[{"role":"user","content":"hi"},{"role":"a\u0062","n\u0061me":"x\"y","content":[{"type":"text","text":"t"},{"content":[{"content":[{"text":"deep"}]}]}],"other":{"role":"no"}}]}`,
	` { "messages" : [ { "role" : "user" , "content" : [ ] } , 1 , "x" , [ { "role" : "nested" } ] , null ] , "stream" : true } `,
	`{"options":{"a":1,"b":[{"role":"not visited"}]},"messages":{"role":"an object","content":{"type":"x"}}}`,
	`{"messages":[{"content":` + strings.Repeat(`{"content":[`, 20) + `{"text":"at the bottom"}` + strings.Repeat(`]}`, 20) + `}]}`,
	`{"messages":[{"role":"user","content":"x","content":"y"}]}`,
	`{"messages":[{"role":"user","Content":"x"}]}`,
	`{"messages":[{"role":"user"}],"model":}`,
	`{"messages":[{"role":"user"}]`,
	`[{"messages":[]}]`,
}

// TestScan: a Scan returns CheckBody's verdict and CheckTop's fields,
// and stops after each visited object and array, in the order they
// close, with where it is and where its fields are.
func TestScan(t *testing.T) {
	for _, body := range scanCases {
		if diff := compareScan([]byte(body)); diff != "" {
			t.Errorf("%s: %s", body, diff)
		}
	}
}

// FuzzScan holds Scan to CheckBody, CheckTop and a walk of the body with
// gjson.
func FuzzScan(f *testing.F) {
	for _, b := range scanCases {
		f.Add([]byte(b))
	}
	for _, b := range requestFixtures(f) {
		f.Add(b)
	}
	for _, c := range eachCases {
		f.Add([]byte(`{"messages":[{"content":` + c + `}],"model":"m"}`))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if diff := compareScan(body); diff != "" {
			t.Fatal(diff)
		}
	})
}

// compareScan scans body and describes the first difference from the
// reference: CheckBody's error, CheckTop's fields, and the stops
// visitWalk finds.
func compareScan(body []byte) string {
	var s Scan
	s.Start(body, scanFields, scanNames...)
	var got []string
	for s.Next() {
		got = append(got, describeVisit(s.Visited(), func(slot int) (Value, bool) { return s.Member(slot) }))
	}
	wantErr := CheckBody(body, scanFields)
	if err := s.Err(); (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		return "got error " + errString(err) + ", want " + errString(wantErr)
	}
	if wantErr != nil {
		return ""
	}
	top, _ := CheckTop(body, scanFields, nil, scanNames...)
	for k := range scanNames {
		if d := diffResult(s.Top(k), top[k]); d != "" {
			return scanNames[k] + ": " + d
		}
	}
	var want []string
	visitWalk(gjson.ParseBytes(body), scanFields, 1, &want)
	if len(got) != len(want) {
		return fmt.Sprintf("got %d stops %q, want %d %q", len(got), got, len(want), want)
	}
	for k := range got {
		if got[k] != want[k] {
			return fmt.Sprintf("stop %d: got %s, want %s", k, got[k], want[k])
		}
	}
	return ""
}

// describeVisit describes a stop: the visited container and, for an
// object, each field it has.
func describeVisit(v *Visited, member func(slot int) (Value, bool)) string {
	d := fmt.Sprintf("depth %d array %t elements %d at %d-%d", v.Depth, v.Array, v.Elements, v.Start, v.End)
	if v.Array {
		return d
	}
	for slot := range v.Fields.count {
		if m, ok := member(slot); ok {
			d += fmt.Sprintf("; %d: %s at %d", slot, m.Raw, m.Index)
			if m.Raw[0] == '"' {
				d += fmt.Sprintf(" text %q", m.Text())
			}
		}
	}
	return d
}

// visitWalk appends to out the stops a Scan makes in v, which fields
// describe, at depth: every visited container, after what it holds.
func visitWalk(v gjson.Result, fields *Fields, depth int, out *[]string) {
	if !v.IsObject() && !v.IsArray() {
		return
	}
	members := map[int]gjson.Result{}
	elements := 0
	v.ForEach(func(k, m gjson.Result) bool {
		inner := fields
		if v.IsObject() {
			inner = nil
			if fd := fields.lookup(appendFold(nil, []byte(k.Str))); fd != nil {
				members[fd.slot], inner = m, fd.inner
			}
		}
		elements++
		visitWalk(m, inner, depth+1, out)
		return true
	})
	if fields == nil || !fields.visit {
		return
	}
	vis := &Visited{Fields: fields, Depth: depth, Array: v.IsArray(), Start: v.Index, End: v.Index + len(v.Raw)}
	if vis.Array {
		vis.Elements = elements
	}
	*out = append(*out, describeVisit(vis, func(slot int) (Value, bool) {
		m, ok := members[slot]
		if !ok {
			return Value{}, false
		}
		return Value{Raw: m.Raw, Index: m.Index, Escaped: strings.IndexByte(m.Raw, '\\') >= 0}, true
	}))
}
