package llm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// member is one member as an iterator or gjson yields it.
type member struct{ key, value string }

func scanMembers(b []byte) ([]member, bool) {
	var got []member
	it := ScanObject(b)
	for {
		k, v, ok := it.Next()
		if !ok {
			break
		}
		got = append(got, member{string(k), string(v)})
	}
	return got, it.WellFormed()
}

func gjsonMembers(b []byte) []member {
	var got []member
	gjson.ParseBytes(b).ForEach(func(k, v gjson.Result) bool {
		got = append(got, member{strings.TrimSuffix(strings.TrimPrefix(k.Raw, `"`), `"`), v.Raw})
		return true
	})
	return got
}

// depth is the nesting depth of valid JSON b.
func depth(b []byte) int {
	d, deepest := 0, 0
	inStr, esc := false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			d++
			deepest = max(deepest, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

// checkScan holds ScanObject to gjson and encoding/json on b: a
// well-formed object's members are the ones gjson's ForEach yields, raw
// for raw; what encoding/json accepts as an object within MaxScanDepth
// below the top is well-formed; and what is well-formed is valid JSON once its
// strings' contents are set aside (the liberties the scanner shares
// with gjson).
func checkScan(t *testing.T, b []byte) {
	t.Helper()
	got, ok := scanMembers(b)
	if ok {
		if want := gjsonMembers(b); !equalMembers(got, want) {
			t.Fatalf("%q: got members %q, gjson reads %q", b, got, want)
		}
	}
	trimmed := strings.TrimLeft(string(b), " \t\r\n")
	if json.Valid(b) && strings.HasPrefix(trimmed, "{") && depth(b) <= MaxScanDepth+1 && !ok {
		t.Fatalf("%q: valid JSON, but the scanner calls it malformed", b)
	}
	if ok && !json.Valid(neutralStrings(b)) {
		t.Fatalf("%q: the scanner calls it well-formed, but it is not JSON", b)
	}
}

func equalMembers(a, b []member) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// neutralStrings replaces each string's contents with x's, keeping the
// structure.
func neutralStrings(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			out = append(out, b[i])
			continue
		}
		end, ok := scanString(b, i)
		if !ok {
			return append(out, b[i:]...)
		}
		out = append(out, `"x"`...)
		i = end - 1
	}
	return out
}

func TestScanObject(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"chunk", `{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi \"there\"\n"},"finish_reason":null}],"usage":null}`, true},
		{"whitespace everywhere", " \r\n\t{ \"a\" : [ 1 , -2.5e+3 , true , false , null , { } , [ ] ] , \"b\" : { \"c\" : \"d\" } } \n", true},
		{"empty", `{}`, true},
		{"escaped quote before the end", `{"a":"x\\\"y\\"}`, true},
		{"a key twice", `{"a":1,"a":2}`, true},
		{"control characters and bad UTF-8 in a string", "{\"a\":\"x\x01\xff\"}", true},
		{"trailing comma", `{"a":1,}`, false},
		{"missing colon", `{"a" 1}`, false},
		{"missing comma", `{"a":1 "b":2}`, false},
		{"two objects", `{"a":1}{"b":2}`, false},
		{"garbage after", `{"a":1} x`, false},
		{"unterminated string", `{"a":"x}`, false},
		{"unclosed", `{"a":[1,2}`, false},
		{"mismatched brackets", `{"a":[1}]`, false},
		{"bare word", `{"a":nul}`, false},
		{"leading zero", `{"a":01}`, false},
		{"lone minus", `{"a":-}`, false},
		{"fraction without digits", `{"a":1.}`, false},
		{"exponent without digits", `{"a":1e+}`, false},
		{"parenthesis", `{"a":(1)}`, false},
		{"array at the top", `[1]`, false},
		{"NUL as whitespace", "{\x00\"a\":1}", false},
		{"too deep", `{"a":` + strings.Repeat("[", MaxScanDepth+1) + strings.Repeat("]", MaxScanDepth+1) + `}`, false},
		{"deep enough", `{"a":` + strings.Repeat("[", MaxScanDepth) + strings.Repeat("]", MaxScanDepth) + `}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := scanMembers([]byte(tc.in)); ok != tc.ok {
				t.Errorf("%q: got well-formed %v, want %v", tc.in, ok, tc.ok)
			}
			checkScan(t, []byte(tc.in))
		})
	}
}

func TestScanArray(t *testing.T) {
	it := ScanArray([]byte(` [ "a\"" , {"b":[1]} , 2 ] `))
	var got []string
	for {
		_, v, ok := it.Next()
		if !ok {
			break
		}
		got = append(got, string(v))
	}
	if want := []string{`"a\""`, `{"b":[1]}`, `2`}; !it.WellFormed() || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q (well-formed %v), want %q", got, it.WellFormed(), want)
	}
	if it := ScanArray([]byte(`{}`)); it.WellFormed() {
		t.Error("an object read as an array")
	}
}

func FuzzScanObject(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","choices":[{"delta":{"content":"Hi"}}],"usage":{"prompt_tokens":5}}`,
		`{"a":[{"b":"\u00e9\ud83d\ude00"},-0.5E-7,true]}`, `{"a":"\\"}`, `{"a":"\"}`, `{} `, `{"a":(1)}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkScan(t, b) })
}

// TestJSONText holds JSONText to gjson's Result.Str, escapes included.
func TestJSONText(t *testing.T) {
	for _, s := range []string{
		`plain`, ``, `tab\tnew\nline\r\\back\/slash\"quote\b\f`, `\u00e9\u4e2D`, `\ud83d\ude00 pair`,
		`\ud83d lone high`, `\ude00 lone low`, `\ud83d\u0041 high then not low`, `\uZZZZ not hex`,
		`\u12`, `cut \`, `unknown \x escape`, "raw \x01 control after \\n", "raw \x01 control, no escape",
		`\u0000 nul`, `\U00e9 upper u`, `\ud83d\ue000 high then past the low ones`, `\ud83d\udbff high then high`,
		"\x1f unit separator after \\t", "space \\t then \x7f",
	} {
		checkText(t, s)
	}
}

func checkText(t *testing.T, contents string) {
	t.Helper()
	v := []byte(`"` + contents + `"`)
	if end, ok := scanString(v, 0); !ok || end != len(v) {
		return // not one string: the scanner would not hand it over
	}
	want := gjson.ParseBytes(v).Str
	buf := []byte("kept")
	got, ok := JSONText(v, &buf)
	if !ok || got != want {
		t.Errorf("%q: got %q (%v), gjson reads %q", v, got, ok, want)
	}
	if string(buf[:4]) != "kept" {
		t.Errorf("%q: JSONText overwrote the buffer's bytes", v)
	}
	if !JSONKeyIs(v[1:len(v)-1], want) {
		t.Errorf("%q: JSONKeyIs does not read it as %q", v, want)
	}
	if JSONKeyIs(v[1:len(v)-1], want+"x") {
		t.Errorf("%q: JSONKeyIs reads it as %q too", v, want+"x")
	}
}

func FuzzJSONText(f *testing.F) {
	f.Add(`tab\tnew\nline \ud83d\ude00 \u00e9`)
	f.Add(`\ud83d\uZZZZ`)
	f.Fuzz(checkText)
}

func TestJSONTextNotAString(t *testing.T) {
	var buf []byte
	for _, v := range []string{`1`, `null`, `{"a":"b"}`, `"`, ``} {
		if s, ok := JSONText([]byte(v), &buf); ok {
			t.Errorf("%q: got text %q, want none", v, s)
		}
	}
}

// TestJSONTextAllocs: once the buffer has grown, reading escaped text
// allocates nothing.
func TestJSONTextAllocs(t *testing.T) {
	v := []byte(`"line one\nline two \u00e9"`)
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() {
		buf = buf[:0]
		_, _ = JSONText(v, &buf)
		_ = JSONKeyIs([]byte(`con\u0074ent`), "content")
		var scratch [16]byte
		_ = DecodeJSONString([]byte(`con\u0074ent`), scratch[:])
	}); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}

// BenchmarkScanEvent measures the scanner, and gjson for comparison, on
// a typical chat stream event.
func BenchmarkScanEvent(b *testing.B) {
	ev := []byte(`{"id":"chatcmpl-C9xQm2bW7nKpL4tYvR8sZ1aD3eF5g","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_560af6e559","choices":[{"index":0,"delta":{"content":" limits"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Xk3q"}`)
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(ev)))
		for b.Loop() {
			it := ScanObject(ev)
			for _, _, ok := it.Next(); ok; _, _, ok = it.Next() {
			}
			if !it.WellFormed() {
				b.Fatal("not well-formed")
			}
		}
	})
	b.Run("gjson", func(b *testing.B) {
		b.SetBytes(int64(len(ev)))
		for b.Loop() {
			gjson.ParseBytes(ev).ForEach(func(k, v gjson.Result) bool { return true })
		}
	})
}

// checkPath holds JSONPath and JSONMember to gjson's Get on b, for the
// paths a, a.b and a.b.c, when b is well-formed.
func checkPath(t *testing.T, b []byte) {
	t.Helper()
	if !WellFormedObject(b) {
		return
	}
	for _, path := range [][]string{{"a"}, {"a", "b"}, {"a", "b", "c"}} {
		want := gjson.GetBytes(b, strings.Join(path, "."))
		got, ok := JSONPath(b, path...)
		if ok != want.Exists() || string(got) != want.Raw {
			t.Errorf("%q, path %v: got %q (%v), gjson finds %q (%v)", b, path, got, ok, want.Raw, want.Exists())
		}
	}
}

func TestJSONPath(t *testing.T) {
	for _, s := range []string{
		`{"a":{"b":{"c":1}}}`, `{"a":1,"a":{"b":2}}`, `{"a":{"x":1},"a":{"b":{"c":"y"}}}`,
		`{"a":[{"b":1}],"a":{"b":[1]}}`, `{"\u0061":{"b":null}}`, `{"a":{"b":{"c":1},"b":{"c":2}}}`,
		`{"a":{"b":"str"},"a":{"b":{"c":3}}}`, `{}`, `{"b":{"a":1}}`,
	} {
		checkPath(t, []byte(s))
	}
}

func FuzzJSONPath(f *testing.F) {
	f.Add([]byte(`{"a":{"x":1},"a":{"b":{"c":"y"}}}`))
	f.Add([]byte(`{"a":[{"b":1}],"a":{"b":[1],"b":{"c":{}}}}`))
	f.Fuzz(checkPath)
}
