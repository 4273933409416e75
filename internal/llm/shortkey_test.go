package llm

import (
	"fmt"
	"strings"
	"testing"
)

// shortKeyCases are bodies whose keys take each of shortKey's turns: the
// usual key, and every kind it leaves to anyKey.
var shortKeyCases = []string{
	`{"model":"m","max_tokens":5,"stream":true}`,
	`{"a":1,"b":{"c":2,"d":[{"e":3}]}}`,
	`{"":1}`, `{"":1,"":2}`, `{"12345678":1}`, `{"12345678":1,"12345678":2}`, `{"123456789":1}`,
	`{"a" :1}`, `{"a": 1}`, `{"a" : 1}`, "{\"a\"\t:\n1}", `{"a"1}`, `{"a"`, `{"a":`, `{"a"}`,
	`{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"model":1,"Model":2}`, `{"MODEL":1}`, `{"stream":1,"stream":2}`,
	`{"m\u006fdel":"x"}`, `{"model":"x","m\u006fdel":"y"}`, `{"k":1,"\u212a":2}`, "{\"é\":1,\"É\":2}",
	`{"generationConfig":{},"generation_config":{}}`, `{"generation_config":{"max_output_tokens":1,"maxOutputTokens":2}}`,
	`{"stream_options":{"include_usage":true}}`, `{"stream_options":{"INCLUDE_USAGE":true}}`,
	`{"messages":[{"role":"user","content":"hi"},{"role":"a","ROLE":"b"}]}`,
	// An object past smallObject keys moves them to a table.
	`{` + keysFrom(0, smallObject+4) + `}`,
	`{` + keysFrom(0, smallObject+1) + `,"k3":1}`,
	// Keys past inlineKeys, across nested objects.
	`{` + keysFrom(0, 12) + `,"x":{` + keysFrom(20, 12) + `,"y":{` + keysFrom(40, 12) + `,"k41":1}}}`,
	// A long key whose hash could equal a short key's word is compared
	// in full.
	`{"a_rather_long_key":1,"a":2,"A_RATHER_LONG_KEY":3}`,
	// From an adversarial review: folding beyond ASCII, escapes that
	// make a short key, NUL, eight bytes ending in a multi-byte
	// character, and the table of an object of 16 keys and more.
	`{"meſſages":[]}`, `{"messages":[],"meſſages":[]}`, `{"me\u017F\u017Fages":[],"messages":1}`,
	`{"max_tokens":1,"max_to\u212aens":2}`, "{\"\u212a\":2,\"\\u212A\":1}",
	`{"abcdefgh":1,"abcdefg\u0068":2}`, `{"":1,"\u0000":2}`, `{"a\u0000":1,"a":2}`,
	"{\"abcdefg\xc3\xa9\":1,\"ABCDEFG\xc3\x89\":2}",
	`{` + keysFrom(0, 16) + `,"model":1,"Model":2}`,
	`{"a":{` + keysFrom(0, 15) + `},"b":{` + keysFrom(0, 15) + `,"c":{` + keysFrom(0, 15) + `,"K1":1}}}`,
}

// keysFrom returns n members "k<i>":i from from on.
func keysFrom(from, n int) string {
	var members []string
	for i := from; i < from+n; i++ {
		members = append(members, fmt.Sprintf(`"k%d":%d`, i, i))
	}
	return strings.Join(members, ",")
}

// TestShortKey: the check and the Scan give the same verdict, the same
// errors and the same stops with shortKey as with anyKey alone.
func TestShortKey(t *testing.T) {
	for _, body := range append(shortKeyCases, scanCases...) {
		if diff := compareShortKey([]byte(body)); diff != "" {
			t.Errorf("%s: %s", body, diff)
		}
	}
}

// FuzzShortKey is TestShortKey for any body.
func FuzzShortKey(f *testing.F) {
	for _, b := range shortKeyCases {
		f.Add([]byte(b))
	}
	for _, b := range requestFixtures(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if diff := compareShortKey(body); diff != "" {
			t.Fatal(diff)
		}
	})
}

// compareShortKey checks body with and without shortKey, against
// checkFields and as a Scan against scanFields, and describes the first
// difference.
func compareShortKey(body []byte) string {
	for _, fields := range []*Fields{checkFields, scanFields} {
		fast := checker{body: body}
		slow := checker{body: body, noShortKeys: true}
		if got, want := fast.checkBody(fields), slow.checkBody(fields); errString(got) != errString(want) {
			return fmt.Sprintf("check: got %s, want %s", errString(got), errString(want))
		}
	}
	scan := func(noShortKeys bool) []string {
		var s Scan
		s.Start(body, scanFields, scanNames...)
		s.c.noShortKeys = noShortKeys
		var out []string
		for s.Next() {
			out = append(out, describeVisit(s.Visited(), func(slot int) (Value, bool) { return s.Member(slot) }))
		}
		out = append(out, "error "+errString(s.Err()))
		for k := range scanNames {
			out = append(out, fmt.Sprintf("%s: %q at %d", scanNames[k], s.Top(k).Raw, s.Top(k).Index))
		}
		return append(out, fmt.Sprintf("shape %+v", s.Shape()))
	}
	got, want := scan(false), scan(true)
	if len(got) != len(want) {
		return fmt.Sprintf("scan: got %q, want %q", got, want)
	}
	for k := range got {
		if got[k] != want[k] {
			return fmt.Sprintf("scan: got %s, want %s", got[k], want[k])
		}
	}
	return ""
}
