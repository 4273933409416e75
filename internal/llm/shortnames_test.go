package llm

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// manyShortFields declares maxShortListed short names, the most a short
// names' table holds, and an alias.
var manyShortFields = func() *Fields {
	f := NewFields()
	for k := range maxShortListed - 1 {
		f.Read(fmt.Sprintf("f%d", k))
	}
	return f.Alias("f0", "ALIAS_0")
}()

// listedShort is lookupShort by comparing the key with each name in
// turn, as it was before the table.
func listedShort(f *Fields, packed uint64) (*field, uint64) {
	for _, n := range f.folds {
		if n.packed == packed {
			return n.fd, n.exact
		}
	}
	return nil, longName
}

// TestShortNamesBuilt: the Fields of the edit tests, and Fields with as
// many short names as a table holds, get a table; each name is found in
// it, as itself.
func TestShortNamesBuilt(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *Fields
	}{{"edit fields", editFields}, {"many short names", manyShortFields}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.f.short.mul == 0 {
				t.Fatalf("got no table for %d names, want one", len(tc.f.folds))
			}
			for _, n := range tc.f.folds {
				if n.packed == longName {
					continue
				}
				s := shortSlot(n.packed, tc.f.short.mul)
				if tc.f.short.packed[s] != n.packed || tc.f.folds[tc.f.short.index[s]].fold != n.fold {
					t.Errorf("%s: got %#x, index %d in its slot, want the name", n.fold, tc.f.short.packed[s], tc.f.short.index[s])
				}
			}
		})
	}
}

// FuzzShortNames holds lookupShort with the table to the list it
// replaced, for any short key: the same field and the same packed name.
func FuzzShortNames(f *testing.F) {
	for _, s := range []string{"", "F0", "f0", "ALIAS_0", "MODEL", "STREAM_O", "F31", "F30", "MAX_TOKE", "x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		// A key reaches the lookup only as UTF-8: the check refuses a
		// body that is not (TestLongNameIsNoKey), and the one short key
		// that packs to longName is not.
		if len(key) > 8 || !utf8.Valid(key) {
			return
		}
		var w [8]byte
		copy(w[:], key)
		packed := packKey(w[:], len(key))
		for _, fields := range []*Fields{editFields, manyShortFields} {
			fd, exact := fields.lookupShort(key, packed)
			wantFD, wantExact := listedShort(fields, packed)
			if fd != wantFD || exact != wantExact {
				t.Fatalf("%q: got %p, %#x; want %p, %#x", key, fd, exact, wantFD, wantExact)
			}
		}
	})
}

// TestLongNameIsNoKey: the one short key that packs to longName, which
// the tables use for "no short name here", is not UTF-8, and the check
// refuses a body holding it before it is looked up; were it looked up,
// an empty slot of a table would match it.
func TestLongNameIsNoKey(t *testing.T) {
	key := "\xff\xff\xff\xff\xff\xff\xff\x7f"
	if got := packKey([]byte(key), len(key)); got != longName {
		t.Fatalf("packKey(%q) = %#x, want longName", key, got)
	}
	for _, tc := range []struct{ name, body string }{
		{"top level", `{"` + key + `":"x"}`},
		{"after a field", `{"model":"m","` + key + `":1}`},
		{"in an inner object", `{"stream_options":{"` + key + `":true}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBody([]byte(tc.body), editFields)
			if err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
				t.Errorf("CheckBody(%q): got %v, want the body refused as not UTF-8", tc.body, err)
			}
		})
	}
}
