package llm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/maphash"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// checkFields is the schema the checker tests use: top-level fields, an
// option object, messages whose content is read, and a Gemini-like
// config with aliases.
var checkFields = NewFields().Read("model", "max_tokens", "stream").
	Nest("stream_options", NewFields().Read("include_usage")).
	Nest("messages", NewFields().Read("content", "role")).
	Nest("generationConfig", NewFields().Read("maxOutputTokens").Alias("maxOutputTokens", "max_output_tokens")).
	Alias("generationConfig", "generation_config")

func TestCheckBodySyntax(t *testing.T) {
	tests := []struct {
		name, body string
		want       string // a part of the error; "" for none
	}{
		{"empty object", `{}`, ""},
		{"space around", " \t\r\n{ \"a\" : 1 } \n", ""},
		{"every kind of value", `{"a":[1,-2.5e+3,0,-0,1E-2,true,false,null,"s",{},[]],"b":{"c":{"d":[[]]}}}`, ""},
		{"escapes", `{"a":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"}`, ""},
		{"lone surrogate", `{"a":"\ud800"}`, ""},
		{"number beyond float64", `{"a":1e309}`, ""},
		{"DEL and non-ASCII", "{\"a\":\"\x7f é 漢字 😀\"}", ""},

		{"array", `[]`, ErrNotObject.Error()},
		{"number", ` 5 `, ErrNotObject.Error()},
		{"string", `"s"`, ErrNotObject.Error()},
		{"nothing", ``, "it is empty"},
		{"only space", "  \n", "it is empty"},
		{"cut", `{"a":`, "ends early"},
		{"cut in a string", `{"a":"bc`, "ends early"},
		{"cut in an escape", `{"a":"\`, "ends early"},
		{"trailing garbage", `{"a":1}x`, `unexpected 'x' at offset 7`},
		{"two objects", `{}{}`, "unexpected '{'"},
		{"byte order mark", "\xef\xbb\xbf{}", "unexpected byte 0xef"},
		{"leading zero", `{"a":01}`, "unexpected '1'"},
		{"bare point", `{"a":1.}`, "unexpected '}'"},
		{"point first", `{"a":.5}`, "unexpected '.'"},
		{"bare minus", `{"a":-}`, "unexpected '}'"},
		{"plus", `{"a":+1}`, "unexpected '+'"},
		{"bare exponent", `{"a":1e}`, "unexpected '}'"},
		{"NaN", `{"a":NaN}`, "unexpected 'N'"},
		{"short literal", `{"a":tru}`, "unexpected '}'"},
		{"capital literal", `{"a":True}`, "unexpected 'T'"},
		{"bad escape", `{"a":"\x"}`, `invalid escape "\\x\"}"`},
		{"short unicode escape", `{"a":"\u12"}`, "invalid escape"},
		{"bad hex", `{"a":"\u12G4"}`, "invalid escape"},
		{"bad escape in a key", `{"\q":1}`, "invalid escape"},
		{"raw newline", "{\"a\":\"x\ny\"}", "control character 0x0a"},
		{"raw tab in a key", "{\"a\tb\":1}", "control character 0x09"},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "not valid UTF-8 at offset 6"},
		{"overlong UTF-8", "{\"a\":\"\xc0\xaf\"}", "not valid UTF-8"},
		{"UTF-8 surrogate", "{\"a\":\"\xed\xa0\x80\"}", "not valid UTF-8"},
		{"invalid UTF-8 in a key", "{\"\xfe\":1}", "not valid UTF-8"},
		{"cut UTF-8", "{\"a\":\"\xe6\xbc\"}", "not valid UTF-8"},
		{"trailing comma", `{"a":1,}`, "unexpected '}'"},
		{"trailing comma in an array", `{"a":[1,]}`, "unexpected ']'"},
		{"missing value", `{"a"}`, "unexpected '}'"},
		{"missing colon", `{"a" 1}`, "unexpected '1'"},
		{"number key", `{1:2}`, "unexpected '1'"},
		{"single quotes", `{'a':1}`, `unexpected '\''`},
		{"mismatched", `{"a":[1}`, "unexpected '}'"},
		{"mismatched object", `{"a":1]`, "unexpected ']'"},
		{"comment", `{"a":1 /* x */}`, "unexpected '/'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBody([]byte(tc.body), nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
			// Whatever it says, it agrees with encoding/json on validity
			// (invalid UTF-8 aside, which encoding/json replaces).
			if valid := json.Valid([]byte(tc.body)) && utf8.ValidString(tc.body); valid != (err == nil || err == ErrNotObject) {
				t.Errorf("encoding/json says valid=%v, CheckBody %v", valid, err)
			}
		})
	}
}

func TestCheckBodyKeys(t *testing.T) {
	tests := []struct {
		name, body string
		want       string // the error; "" for none
	}{
		{"duplicate", `{"max_tokens":1,"messages":[],"max_tokens":64000}`, `duplicate key "max_tokens" in the request body`},
		{"duplicate nulls", `{"max_tokens":null,"max_tokens":null}`, `duplicate key "max_tokens" in the request body`},
		{"escaped duplicate", `{"model":"a","m\u006fdel":"b"}`, `duplicate key "model" in the request body`},
		{"fully escaped duplicate", `{"\u006d\u006F\u0064\u0065\u006c":"a","model":"b"}`, `duplicate key "model" in the request body`},
		{"case duplicate", `{"max_tokens":1,"MAX_TOKENS":2}`,
			`duplicate key "MAX_TOKENS" in the request body: "max_tokens" and "MAX_TOKENS" are one key to providers that ignore case`},
		{"Kelvin sign", `{"k":1,"\u212a":2}`, "duplicate key \"\u212a\" in the request body: \"k\" and \"\u212a\" are one key"},
		{"Kelvin sign in UTF-8", "{\"max_to\xe2\x84\xaaens_x\":1,\"MAX_TOKENS_X\":2}", `duplicate key "MAX_TOKENS_X"`},
		{"long s", "{\"s\":1,\"\xc5\xbf\":2}", `"s" and "ſ" are one key`},
		{"Greek sigmas", `{"σ":1,"ς":2}`, `"σ" and "ς" are one key`},
		{"lone surrogates are U+FFFD", `{"\ud800":1,"\udc00":2}`, "duplicate key \"\ufffd\""},
		{"lone surrogate and U+FFFD", `{"\ud800x":1,"\ufffdx":2}`, "duplicate key \"\ufffdx\""},
		{"surrogate pair", `{"\ud83d\ude00":1,"😀":2}`, `duplicate key "😀"`},
		{"nested", `{"messages":[{"role":"user","content":"a","content":"b"}]}`, `duplicate key "content" in the request body at messages[0]`},
		{"deeper", `{"a":{"b":[0,{"c":[{"x":1,"x":2}]}]}}`, `duplicate key "x" in the request body at a.b[1].c[0]`},
		{"odd key in the path", `{"a b":{"x":1,"x":2}}`, `duplicate key "x" in the request body at "a b"`},
		{"same key in other objects", `{"a":{"a":1},"b":{"a":2},"c":[{"a":1},{"a":2}]}`, ""},
		{"differs only beyond case", `{"maxtokens":1,"max_tokens":2,"max-tokens":3}`, ""},
		{"not a case of a field", `{"other":{"MAX_TOKENS":1,"Model":"x"}}`, ""},
		{"escaped field", `{"m\u006fdel":"x"}`, ""},

		{"field in capitals", `{"MAX_TOKENS":5}`, `key "MAX_TOKENS" in the request body is "max_tokens" in another case: providers disagree`},
		{"field capitalised", `{"Model":"gpt-4o"}`, `key "Model" in the request body is "model" in another case`},
		{"field with a long s", "{\"\xc5\xbftream\":true}", `key "ſtream" in the request body is "stream" in another case`},
		{"field with an escape", `{"Mod\u0065l":"x"}`, `key "Model" in the request body is "model" in another case`},
		{"nested field", `{"stream_options":{"Include_Usage":true}}`, `key "Include_Usage" in the request body at stream_options is "include_usage" in another case`},
		{"field of an array's objects", `{"messages":[{"role":"user"},{"Content":"x"}]}`, `at messages[1] is "content" in another case`},
		{"field in nested arrays", `{"messages":[[{"CONTENT":"x"}]]}`, `at messages[0][0] is "content" in another case`},
		{"alias in another case", `{"Generation_Config":{}}`, `is "generation_config" in another case`},
		{"both names", `{"generationConfig":{},"generation_config":{}}`,
			`duplicate field in the request body: "generation_config" and "generationConfig" are the same field`},
		{"both names nested", `{"generation_config":{"max_output_tokens":1,"maxOutputTokens":2}}`,
			`duplicate field in the request body at generation_config: "maxOutputTokens" and "max_output_tokens" are the same field`},
		{"one name each", `{"generation_config":{"maxOutputTokens":2}}`, ""},
		{"long key quoted short", `{"` + strings.Repeat("é", 40) + `":1,"` + strings.Repeat("É", 40) + `":2}`, `"…`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBody([]byte(tc.body), checkFields)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestCheckBodyManyKeys: objects past smallObject keys move to the map,
// keep finding duplicates there, and forget their keys when they close;
// an object of 100,000 keys costs about one probe per key, not one per
// pair.
func TestCheckBodyManyKeys(t *testing.T) {
	object := func(n int, extra string) string {
		var sb strings.Builder
		sb.WriteString("{")
		for i := range n {
			if i > 0 {
				sb.WriteString(",")
			}
			sb.WriteString(`"k` + itoa(i) + `":` + itoa(i))
		}
		return sb.String() + extra + "}"
	}
	const wide = 100_000
	c := checker{body: []byte(object(wide, "")), seed: maphash.MakeSeed()}
	if err := c.check(nil); err != nil {
		t.Fatal(err)
	}
	if c.probes > 2*wide {
		t.Errorf("got %d probes for %d keys, want at most %d", c.probes, wide, 2*wide)
	}
	if err := CheckBody([]byte(object(wide, `,"K99999":1`)), nil); err == nil || !strings.Contains(err.Error(), `"k99999" and "K99999"`) {
		t.Errorf("got error %v, want the duplicate of the last key", err)
	}
	if err := CheckBody([]byte(object(40, `,"k3":1`)), nil); err == nil || !strings.Contains(err.Error(), `duplicate key "k3"`) {
		t.Errorf("got error %v, want the duplicate of an early key", err)
	}
	// Sibling objects with many keys, and nested ones: each starts afresh.
	many := object(40, "")
	body := `{"a":[` + many + `,` + many + `],"b":` + many[:len(many)-1] + `,"in":` + many + `}}`
	if err := CheckBody([]byte(body), nil); err != nil {
		t.Errorf("got error %v for objects that repeat each other's keys", err)
	}
	nested := many[:len(many)-1] + `,"in":` + many[:len(many)-1] + `,"k1":0}}`
	if err := CheckBody([]byte(`{"x":`+nested+`}`), nil); err == nil || !strings.Contains(err.Error(), `duplicate key "k1" in the request body at x.in`) {
		t.Errorf("got error %v, want the duplicate in the inner object", err)
	}
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

// TestCheckBodyDepth: nesting is bounded without recursion, so a body of
// millions of brackets gets an error rather than crashing the process.
func TestCheckBodyDepth(t *testing.T) {
	nest := func(n int, open, close string) []byte {
		return []byte(`{"a":` + strings.Repeat(open, n-1) + strings.Repeat(close, n-1) + `}`)
	}
	if err := CheckBody(nest(MaxDepth, "[", "]"), nil); err != nil {
		t.Errorf("got error %v at %d levels, want none", err, MaxDepth)
	}
	if err := CheckBody(nest(MaxDepth+1, "[", "]"), nil); !errors.Is(err, ErrTooDeep) {
		t.Errorf("got error %v at %d levels, want %v", err, MaxDepth+1, ErrTooDeep)
	}
	if err := CheckBody(nest(MaxDepth+1, `{"a":`, "}"), nil); !errors.Is(err, ErrTooDeep) {
		t.Errorf("got error %v for nested objects, want %v", err, ErrTooDeep)
	}
	const huge = 12 << 20
	for name, body := range map[string][]byte{
		"brackets": bytes.Repeat([]byte("["), huge),
		"objects":  append([]byte("{"), bytes.Repeat([]byte(`"a":{`), huge/5)...),
		"mixed":    append([]byte(`{"a":`), bytes.Repeat([]byte(`[{"b":`), huge/6)...),
	} {
		if err := CheckBody(body, nil); !errors.Is(err, ErrTooDeep) {
			t.Errorf("%s: got error %v, want %v", name, err, ErrTooDeep)
		}
	}
	// Wide is not deep.
	wide := append(append([]byte(`{"a":[`), bytes.Repeat([]byte(`[[]],`), huge/5)...), `[]]}`...)
	if err := CheckBody(wide, nil); err != nil {
		t.Errorf("got error %v for a wide body, want none", err)
	}
}

// TestCheckBodyAllocs: checking a typical body allocates nothing.
func TestCheckBodyAllocs(t *testing.T) {
	bodies := requestFixtures(t)
	bodies = append(bodies, []byte(`{"model":"m","m\u00e9ta":{"Ä":1},"messages":[{"role":"user","content":"`+strings.Repeat("hé ", 1000)+`"}]}`))
	for _, body := range bodies {
		if err := CheckBody(body, checkFields); err != nil {
			continue // a fixture that is refused on purpose
		}
		if n := testing.AllocsPerRun(10, func() { _ = CheckBody(body, checkFields) }); n > 0 {
			t.Errorf("got %.1f allocations checking %.60s…, want 0", n, body)
		}
	}
}

// requestFixtures returns the request bodies of every wire format's
// fixtures.
func requestFixtures(t testing.TB) [][]byte {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/*/*request*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no request fixtures (%v)", err)
	}
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestFoldMatchesEqualFold: two keys fold alike exactly when
// bytes.EqualFold, encoding/json's test for a struct field, says they are
// equal; checked for every rune against every member of its case orbit
// and against its neighbours.
func TestFoldMatchesEqualFold(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		a := string(r)
		fa := string(appendFold(nil, []byte(a)))
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if fo := string(appendFold(nil, []byte(string(o)))); fo != fa {
				t.Fatalf("%U folds to %q, its case %U to %q", r, fa, o, fo)
			}
		}
		if n := r + 1; utf8.ValidRune(n) {
			b := string(n)
			if eq := bytes.EqualFold([]byte(a), []byte(b)); eq != (fa == string(appendFold(nil, []byte(b)))) {
				t.Fatalf("%U and %U: EqualFold %v, folds differ", r, n, eq)
			}
		}
	}
}

// FuzzCheckBody compares CheckBody with a reference made of
// encoding/json: it must accept exactly the valid UTF-8 JSON objects
// within MaxDepth whose objects have no two keys EqualFold says are
// equal, and no key that is a field of checkFields in another case or a
// second name of one.
func FuzzCheckBody(f *testing.F) {
	for _, b := range requestFixtures(f) {
		f.Add(b)
	}
	for _, s := range []string{
		`{}`, `{"a":1,"A":2}`, `{"max_tokens":1,"max_tokens":2}`, `{"m\u006fdel":1,"model":2}`,
		`{"messages":[{"Content":1}]}`, `{"generationConfig":{},"generation_config":{}}`,
		`{"\ud800":1,"\udc00":2}`, `{"\u212a":1,"k":2}`, `[1,2]`, `{"a":[{"b":{"c":[1e309,-0,"\u00e9"]}}]}`,
		"{\"a\":\"\xff\"}", `{"stream_options":{"INCLUDE_USAGE":1}}`, `{"a":"\"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := CheckBody(body, checkFields)
		want := referenceCheck(body, checkFields)
		if (err == nil) != (want == "") {
			t.Fatalf("CheckBody: %v; reference: %q", err, want)
		}
		if err == ErrNotObject && want != "not an object" {
			t.Fatalf("CheckBody: %v; reference: %q", err, want)
		}
	})
}

// referenceCheck is CheckBody's rules written with encoding/json and
// bytes.EqualFold, slowly: "" when body is acceptable, else why not.
func referenceCheck(body []byte, root *Fields) string {
	if !utf8.Valid(body) || !json.Valid(body) {
		return "invalid"
	}
	type frame struct {
		object    bool
		keys      []string
		fields    *Fields
		valueOf   *Fields // what is read in the value of the last key
		seen      map[*field]bool
		expectKey bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	first := true
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			return "invalid: " + err.Error()
		}
		if first && tok != json.Delim('{') {
			return "not an object"
		}
		first = false
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if key, ok := tok.(string); ok && top != nil && top.object && top.expectKey {
			for _, k := range top.keys {
				if bytes.EqualFold([]byte(k), []byte(key)) {
					return "duplicate"
				}
			}
			top.keys = append(top.keys, key)
			top.expectKey, top.valueOf = false, nil
			if top.fields != nil {
				for _, fd := range uniqueFields(top.fields) {
					for _, n := range fd.names {
						if n == key {
							if top.seen[fd] {
								return "alias"
							}
							top.seen[fd] = true
							top.valueOf = fd.inner
						} else if bytes.EqualFold([]byte(n), []byte(key)) && !fd.is([]byte(key)) {
							return "case"
						}
					}
				}
			}
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) == MaxDepth {
				return "deep"
			}
			fields := root
			if top != nil {
				fields = top.fields
				if top.object {
					fields, top.expectKey = top.valueOf, true
				}
			}
			stack = append(stack, &frame{object: tok == json.Delim('{'), fields: fields, seen: map[*field]bool{}, expectKey: true})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			if top.object {
				top.expectKey = true
			}
		}
	}
}

// uniqueFields returns the fields of f, each once (byFold has a field
// under each of its names).
func uniqueFields(f *Fields) []*field {
	var out []*field
	seen := map[*field]bool{}
	for _, fd := range f.byFold {
		if !seen[fd] {
			seen[fd] = true
			out = append(out, fd)
		}
	}
	return out
}

// TestFoldWord: folding eight ASCII bytes at once is appendFold's
// folding of each, for every ASCII byte at every position.
func TestFoldWord(t *testing.T) {
	for ch := range 0x80 {
		for pos := range 8 {
			word := []byte("a_Zz{@`0")
			word[pos] = byte(ch)
			want := appendFold(nil, word)
			got := binary.LittleEndian.AppendUint64(nil, foldWord(binary.LittleEndian.Uint64(word)))
			if string(got) != string(want) {
				t.Fatalf("%q: got %q, want %q", word, got, want)
			}
		}
	}
}

// TestStringStops: the lowest bit stringStops sets is at the first byte
// of the word that is a quote, a backslash or a control character, for
// every byte at every place among neighbours of every kind, and no bit
// is set in a word without one.
func TestStringStops(t *testing.T) {
	isStop := func(ch byte) bool { return ch == '"' || ch == '\\' || ch < 0x20 }
	for _, fill := range []byte{'a', ' ', '!', '#', '[', ']', 0x7f, 0x80, 0xa2, 0xdc, 0xff} {
		for at := range 8 {
			for v := range 256 {
				var w [8]byte
				for k := range w {
					w[k] = fill
				}
				w[at] = byte(v)
				// The next byte differs, so that a borrow from a stop
				// meets every kind of neighbour.
				if at < 7 {
					w[at+1] = byte(v + 1)
				}
				want := 8
				for k, ch := range w {
					if isStop(ch) {
						want = k
						break
					}
				}
				m := stringStops(binary.LittleEndian.Uint64(w[:]))
				got := 8
				if m != 0 {
					got = bits.TrailingZeros64(m) >> 3
				}
				if got != want {
					t.Fatalf("word % x: got first stop %d, want %d", w, got, want)
				}
			}
		}
	}
}
