package llmtest

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// Events makes stream event payloads for the readers' path tests: a
// reader reads a well-formed event with the JSON scanner and anything
// else with gjson, and must report the same either way. Events are JSON
// objects built at random from a wire format's own names, so that they
// reach every branch of its reader, with what tests a reading: escaped
// keys and texts (invalid escapes, lone surrogates, raw control
// characters), repeated keys, values of the wrong kind, nesting; one in
// ten is cut short, which only gjson reads.
type Events struct {
	// Keys are the member names of the format's events, at any level.
	Keys []string
	// Values are raw JSON values worth trying besides the generated
	// ones: the format's event types, say.
	Values []string
	// Seeds are real events (well-formed objects), of which two events
	// in three are mutations: members dropped, repeated, their keys
	// escaped, their values replaced, nested objects mutated in turn.
	Seeds [][]byte
}

// texts are string values that test a reading of text.
var texts = []string{
	`"plain words"`, `""`, `"line\nbreak \"quoted\" \u00e9 \ud83d\ude00 \/ \t"`, `"lone \ud83d surrogate"`,
	`"bad \x escape"`, "\"raw \x01 control\"", "\"raw \x01 and an escape \\n\"", `"\u12"`, `"\uZZZZ"`,
}

// Event returns one event payload.
func (e Events) Event(r *rand.Rand) []byte {
	var obj string
	if len(e.Seeds) > 0 && r.IntN(3) > 0 {
		obj = e.mutate(r, e.Seeds[r.IntN(len(e.Seeds))], 0)
	} else {
		obj = e.object(r, 0)
	}
	ev := e.pick(r, "", " ", "\n") + obj + e.pick(r, "", " ", "\r\n")
	if r.IntN(10) == 0 {
		ev = ev[:r.IntN(len(ev))]
	}
	return []byte(ev)
}

func (Events) pick(r *rand.Rand, vs ...string) string { return vs[r.IntN(len(vs))] }

func (e Events) object(r *rand.Rand, depth int) string {
	var ms []string
	for range r.IntN(6) {
		name := e.Keys[r.IntN(len(e.Keys))]
		key := `"` + name + `"`
		if r.IntN(8) == 0 && len(name) > 1 {
			// The same name, a letter escaped.
			key = `"` + name[:1] + fmt.Sprintf(`\u%04x`, name[1]) + name[2:] + `"`
		}
		ms = append(ms, key+e.pick(r, ":", " : ")+e.value(r, depth+1))
	}
	return "{" + strings.Join(ms, e.pick(r, ",", " , ", ",\n ")) + "}"
}

// mutate rebuilds the object or array v with random changes.
func (e Events) mutate(r *rand.Rand, v []byte, depth int) string {
	it, open, end := llm.ScanObject(v), "{", "}"
	if v[0] == '[' {
		it, open, end = llm.ScanArray(v), "[", "]"
	}
	var ms []string
	for k, val, ok := it.Next(); ok; k, val, ok = it.Next() {
		key := ""
		if open == "{" {
			key = `"` + string(k) + `":`
			if r.IntN(10) == 0 && len(k) > 1 && bytes.IndexByte(k, '\\') < 0 {
				key = `"` + string(k[:1]) + fmt.Sprintf(`\u%04x`, k[1]) + string(k[2:]) + `":`
			}
		}
		value := string(val)
		switch n := r.IntN(10); {
		case n == 0:
			continue
		case n == 1:
			value = e.value(r, depth+1)
		case n == 2:
			ms = append(ms, key+e.value(r, depth+1))
		case n < 6 && (val[0] == '{' || val[0] == '[') && depth < 5:
			value = e.mutate(r, val, depth+1)
		}
		ms = append(ms, key+value)
	}
	return open + strings.Join(ms, e.pick(r, ",", " , ")) + end
}

func (e Events) value(r *rand.Rand, depth int) string {
	switch n := r.IntN(10); {
	case n < 3 && depth < 5:
		return e.object(r, depth)
	case n == 3 && depth < 5:
		var vs []string
		for range r.IntN(4) {
			vs = append(vs, e.value(r, depth+1))
		}
		return "[" + strings.Join(vs, ",") + "]"
	case n == 4 && len(e.Values) > 0:
		return e.Values[r.IntN(len(e.Values))]
	case n == 5:
		return e.pick(r, `12`, `-3`, `2.5e3`, `1e400`, `0`, `null`, `true`, `false`)
	}
	return texts[r.IntN(len(texts))]
}

// Fingerprint is a token counter whose count of a text is a hash of it,
// so that two readers agree on their observed output only if they
// counted the same texts.
type Fingerprint struct{}

// CountTokens implements llm.Counter.
func (Fingerprint) CountTokens(_, text string) int64 {
	h := fnv.New32a()
	h.Write([]byte(text))
	return int64(h.Sum32()%1_000_000) + 1
}

// ImageTokens implements llm.Counter.
func (Fingerprint) ImageTokens(string, string, int, int) int64 { return 0 }
