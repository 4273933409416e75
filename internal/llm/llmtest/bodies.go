package llmtest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"
)

// PNGDataURL returns a data URL of a blank width×height PNG: an image
// part whose size the request tells.
func PNGDataURL(t testing.TB, width, height int) string {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, width, height))); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

// A Knob is a part of a request body that [Bodies] varies.
type Knob struct {
	// Path is where it goes: the names of the objects on the way and its
	// own, outermost first. An element may give the field's other names
	// after "|" (Gemini's snake_case).
	Path []string
	// Values are raw JSON values it takes. Bodies adds values no
	// provider would accept, and numbers written in odd ways.
	Values []string
	// Required knobs are in most bodies; the others in half of them.
	Required bool
}

// oddValues are what Bodies puts in a knob instead of one of its values,
// now and then: nulls, the wrong types, and numbers written every way
// JSON allows, in and out of range.
var oddValues = []string{
	`null`, `"5"`, `"true"`, `true`, `false`, `[]`, `{}`, `[1]`, `{"a":1}`,
	`0`, `-0`, `1`, `-1`, `2`, `1.0`, `1.5`, `64.0`, `6.4e1`, `1e3`, `1E+3`, `1e309`, `-1e309`, `128`, `129`, `8`, `9`,
	`2147483647`, `2147483648`, `9223372036854775807`, `9223372036854775808`, `1000000`, `0.1e1`,
}

// Bodies returns n request bodies made of knobs at random, seeded so that
// a failure repeats, with the mischief a wire format must see through:
// keys repeated (with the same or another value), escaped, in another case
// (the Kelvin sign and the long s too), under another of their names,
// objects on the way replaced by null or a scalar, and odd values.
func Bodies(seed uint64, n int, knobs []Knob) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 0x7769726573))
	out := make([][]byte, n)
	for i := range out {
		root := &object{}
		for _, k := range knobs {
			p := 0.5
			if k.Required {
				p = 0.92
			}
			if rng.Float64() >= p {
				continue
			}
			root.put(rng, k)
			if rng.Float64() < 0.04 {
				root.put(rng, k) // again: a duplicate, or not, as it turns out
			}
		}
		var sb strings.Builder
		root.write(rng, &sb)
		out[i] = []byte(sb.String())
	}
	return out
}

// object is a JSON object under construction, its members in order.
type object struct {
	members []member
}

type member struct {
	key   string // raw JSON, quotes included
	raw   string // a scalar or array, when obj is nil
	inner *object
}

// put adds k to o, spelling each name on its path at random.
func (o *object) put(rng *rand.Rand, k Knob) {
	cur := o
	for i, elem := range k.Path {
		key := spell(rng, strings.Split(elem, "|"))
		if i == len(k.Path)-1 {
			v := k.Values[rng.IntN(len(k.Values))]
			if rng.Float64() < 0.12 {
				v = oddValues[rng.IntN(len(oddValues))]
			}
			cur.members = append(cur.members, member{key: key, raw: v})
			return
		}
		if rng.Float64() < 0.03 {
			// The object on the way is not one.
			cur.members = append(cur.members, member{key: key, raw: oddValues[rng.IntN(len(oddValues))]})
			return
		}
		next := (*object)(nil)
		for j := range cur.members {
			if m := &cur.members[j]; m.key == key && m.inner != nil {
				next = m.inner
			}
		}
		if next == nil {
			next = &object{}
			cur.members = append(cur.members, member{key: key, inner: next})
		}
		cur = next
	}
}

// spell returns a JSON key for a field with names: mostly the first,
// sometimes another, and sometimes one disguised.
func spell(rng *rand.Rand, names []string) string {
	name := names[0]
	if len(names) > 1 && rng.Float64() < 0.3 {
		name = names[1+rng.IntN(len(names)-1)]
	}
	switch r := rng.Float64(); {
	case r < 0.90:
		return `"` + name + `"`
	case r < 0.92:
		return `"` + strings.ToUpper(name) + `"`
	case r < 0.94:
		return `"` + strings.ToUpper(name[:1]) + name[1:] + `"`
	case r < 0.97:
		// One character escaped: the same key, to a provider.
		i := rng.IntN(len(name))
		return `"` + name[:i] + fmt.Sprintf(`\u%04x`, name[i]) + name[i+1:] + `"`
	case r < 0.985:
		// The Kelvin sign for a k, the long s for an s: the same field to
		// encoding/json's case-insensitive match.
		s := strings.Replace(name, "k", "\u212a", 1)
		if s == name {
			s = strings.Replace(name, "s", "\u017f", 1)
		}
		return `"` + s + `"`
	default:
		// A name that is not the field's.
		return `"` + name + `_x"`
	}
}

// write writes o as JSON, with whitespace here and there.
func (o *object) write(rng *rand.Rand, sb *strings.Builder) {
	space := func() {
		if rng.Float64() < 0.1 {
			sb.WriteString([]string{" ", "\n", "\t", "\r\n  "}[rng.IntN(4)])
		}
	}
	sb.WriteByte('{')
	for i, m := range o.members {
		if i > 0 {
			sb.WriteByte(',')
		}
		space()
		sb.WriteString(m.key)
		space()
		sb.WriteByte(':')
		space()
		if m.inner != nil {
			m.inner.write(rng, sb)
		} else {
			sb.WriteString(m.raw)
		}
		space()
	}
	sb.WriteByte('}')
}
