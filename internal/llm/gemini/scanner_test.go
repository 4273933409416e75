package gemini

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// scan runs a Scanner over body in the pieces cuts make and returns what
// it reported.
func scan(body string, cuts ...int) (usage []string, text string, finish int) {
	var s Scanner
	var b strings.Builder
	s.OnUsage = func(obj []byte) { usage = append(usage, string(obj)) }
	s.OnText = func(p []byte) { b.Write(p) }
	s.OnFinish = func() { finish++ }
	prev := 0
	for _, c := range cuts {
		s.Write([]byte(body[prev:c]))
		prev = c
	}
	s.Write([]byte(body[prev:]))
	return usage, b.String(), finish
}

func TestScanner(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		usage  []string
		text   string
		finish int
	}{
		{"object", `{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3}}`,
			[]string{`{"promptTokenCount":3}`}, "hi", 1},
		{"array", "[{\"usageMetadata\": {\"a\":1}}\r\n,\r\n{\"usageMetadata\" : { \"a\" : [2, {\"b\":3}] } }]",
			[]string{`{"a":1}`, `{ "a" : [2, {"b":3}] }`}, "", 0},
		{"nested usageMetadata is not a response's", `{"candidates":[{"usageMetadata":{"x":1}}],"tool":{"usageMetadata":{"y":2}}}`,
			nil, "", 0},
		{"key-like values are not keys", `{"note":"usageMetadata","text":"text","v":["finishReason"]}`,
			nil, "text", 0},
		{"escapes in strings", `{"text":"a\"b\\c","usageMetadata":{"s":"}\"{"}}`,
			[]string{`{"s":"}\"{"}`}, `a"b\c`, 0},
		{"escaped keys are read as JSON reads them", `{"usage\u004detadata":{"x":1},"t\u0065xt":"a","finish\u0052eason":"STOP"}`,
			[]string{`{"x":1}`}, "a", 1},
		{"an escaped key that is not one", `{"usage\u004Detadatax":{"x":1},"\\text":"a"}`, nil, "", 0},
		{"an escaped key too long to be one", `{"` + strings.Repeat(`\u0020`, 20) + `usageMetadata":{"x":1}}`, nil, "", 0},
		{"usage not an object", `{"usageMetadata":null,"usageMetadata":7}`, nil, "", 0},
		{"a function call is output, raw, and its text is not counted twice",
			`{"candidates":[{"content":{"parts":[{"text":"hi"},{"functionCall":{"name":"f","args":{"text":"a\"b", "n":[1]}}}]}}]}`,
			nil, `hi{"name":"f","args":{"text":"a\"b", "n":[1]}}`, 0},
		{"a function call in snake case", `{"function_call":{"name":"g"},"text":"x"}`, nil, `{"name":"g"}x`, 0},
		{"stray closers are ignored", `}}]]{"usageMetadata":{"x":1}`, []string{`{"x":1}`}, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i <= len(tc.body); i++ {
				usage, text, finish := scan(tc.body, i)
				if strings.Join(usage, "|") != strings.Join(tc.usage, "|") || text != tc.text || finish != tc.finish {
					t.Fatalf("split at %d: got usage %q text %q finish %d, want %q %q %d", i, usage, text, finish, tc.usage, tc.text, tc.finish)
				}
			}
		})
	}
}

// TestScannerBounded: a huge usageMetadata is dropped, not kept, and deep
// nesting costs nothing.
func TestScannerBounded(t *testing.T) {
	huge := `{"usageMetadata":{"pad":"` + strings.Repeat("x", 2*maxCapture) + `"},"usageMetadata":{"ok":1}}`
	usage, _, _ := scan(huge)
	if len(usage) != 1 || usage[0] != `{"ok":1}` {
		t.Errorf("got %d captures, want only the small one", len(usage))
	}
	var s Scanner
	s.Write([]byte(strings.Repeat("[", 1<<20)))
	if cap(s.capBuf) != 0 {
		t.Errorf("deep nesting grew the capture buffer to %d", cap(s.capBuf))
	}
}

// FuzzScanner compares the scanner with gjson on the same body, and its
// results across a split.
func FuzzScanner(f *testing.F) {
	f.Add(`{"usageMetadata":{"promptTokenCount":1},"candidates":[{"content":{"parts":[{"text":"x"}]}}]}`, uint16(5))
	f.Add(`[{"usageMetadata":{"a":1}},{"usageMetadata":{"a":2}}]`, uint16(20))
	f.Fuzz(func(t *testing.T, body string, cut uint16) {
		c := int(cut) % (len(body) + 1)
		u1, t1, f1 := scan(body)
		u2, t2, f2 := scan(body, c)
		if strings.Join(u1, "\x00") != strings.Join(u2, "\x00") || t1 != t2 || f1 != f2 {
			t.Fatalf("split at %d changed the result", c)
		}
		if !gjson.Valid(body) {
			return
		}
		doc := gjson.Parse(body)
		var want []string
		collect := func(v gjson.Result) {
			if !v.IsObject() {
				return
			}
			// The last usageMetadata key wins in gjson; the scanner
			// reports every one, so compare the last.
			if u := v.Get("usageMetadata"); u.IsObject() {
				want = append(want, u.Raw)
			}
		}
		if doc.IsArray() {
			doc.ForEach(func(_, v gjson.Result) bool { collect(v); return true })
		} else {
			collect(doc)
		}
		last := func(s []string) string {
			if len(s) == 0 {
				return ""
			}
			return s[len(s)-1]
		}
		if len(want) > 0 && last(u1) != last(want) && !strings.Contains(body, `\`) {
			t.Fatalf("got last usage %q, gjson says %q", last(u1), last(want))
		}
	})
}

// TestScannerRepeatedUsage: a response with two usageMetadata members
// is reported at the second; an array of responses, one each, is not.
func TestScannerRepeatedUsage(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"one response", `{"usageMetadata":{"promptTokenCount":1}}`, 0},
		{"a stream of responses", `[{"usageMetadata":{"promptTokenCount":1}},{"usageMetadata":{"promptTokenCount":2}}]`, 0},
		{"usage nested deeper", `{"usageMetadata":{"promptTokenCount":1},"candidates":[{"usageMetadata":{}}]}`, 0},
		{"usage twice", `{"usageMetadata":{"promptTokenCount":1},"usageMetadata":{"promptTokenCount":0}}`, 1},
		{"usage under both names", `{"usageMetadata":{"promptTokenCount":1},"usage_metadata":null}`, 1},
		{"usage twice, once under an escaped name", `{"usage\u004detadata":{"promptTokenCount":1},"usageMetadata":{"promptTokenCount":0}}`, 1},
		{"usage twice in the second response", `[{"usageMetadata":{}},{"usageMetadata":{},"x":1,"usageMetadata":{}}]`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := 0
			s := Scanner{OnRepeatedUsage: func() { got++ }}
			s.Write([]byte(tc.body))
			if got != tc.want {
				t.Errorf("got %d reports, want %d", got, tc.want)
			}
		})
	}
}

// FuzzStringStop holds stringStop to bytes.IndexAny, which it replaced.
func FuzzStringStop(f *testing.F) {
	for _, s := range []string{``, `abc`, `"`, `\`, `ab"cd\`, `ab\"cd`, `\\"`, `no stop at all, a long run of text`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := stringStop(b), bytes.IndexAny(b, "\"\\"); got != want {
			t.Fatalf("stringStop(%q) = %d, want %d", b, got, want)
		}
	})
}
