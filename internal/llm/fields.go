package llm

import (
	"fmt"

	"github.com/tidwall/gjson"
)

// Fields is what a wire format reads of one kind of object in a request
// body: the names of the fields it reads there and, for a field whose
// value it reads into, the Fields of that value (an object, or the
// objects of an array, at any depth of arrays). [CheckBody] refuses a key
// that folds to one of these names without being it, and two keys that
// are the same field under different names; [SetField] edits a field
// under whichever of its names the body uses.
//
// Fields are built once, when a package is initialised, with [NewFields]
// and the builder methods, and are read-only after: the builders panic on
// a declaration that contradicts itself, which is a bug in the wire
// format, never a property of a request.
type Fields struct {
	// byFold maps the case-folded spelling of every name of every field
	// to the field.
	byFold map[string]*field
	count  int
	// folds lists byFold's entries while there are few, for lookup: a
	// check looks up every key of a body, and comparing a few strings
	// is quicker than hashing one.
	folds []foldedName
	// visit is set by Visit.
	visit bool
}

// foldedName is an entry of Fields.folds.
type foldedName struct {
	fold string
	// packed is fold as packKey packs a short key, or longName.
	packed uint64
	fd     *field
}

// longName is the packed form of a name longer than eight bytes, which
// no short key packs to: its bytes would have to be 0xff, which UTF-8
// never has.
const longName = ^uint64(0)

// newFoldedName returns the entry of fold, a folded name, for field fd.
func newFoldedName(fold string, fd *field) foldedName {
	packed := longName
	if len(fold) <= 8 {
		var w [8]byte
		copy(w[:], fold)
		packed = packKey(w[:], len(fold))
	}
	return foldedName{fold: fold, packed: packed, fd: fd}
}

// maxListed is how many names Fields.lookup compares one by one, and
// maxShortListed how many lookupShort does.
const (
	maxListed      = 8
	maxShortListed = 32
)

// field is one field of a Fields.
type field struct {
	bit   uint64   // this field's bit in a checker level's seen set
	slot  int      // the bit's index: the field's place among its Fields
	names []string // the field's names, the declared one first
	inner *Fields  // what is read inside the value, or nil
}

// maxFields is how many fields one Fields may declare: a checker level
// records the fields it has seen in a uint64.
const maxFields = 64

// NewFields returns an empty Fields to build on.
func NewFields() *Fields {
	return &Fields{byFold: map[string]*field{}}
}

// Read declares fields read as a whole (a number, a flag, text), each
// with one name.
func (f *Fields) Read(names ...string) *Fields {
	for _, n := range names {
		f.add(n, nil)
	}
	return f
}

// Nest declares a field whose value is read into, with inner describing
// what is read there. inner may be f itself, or contain it: content
// blocks that hold content blocks.
func (f *Fields) Nest(name string, inner *Fields) *Fields {
	f.add(name, inner)
	return f
}

// Alias declares alias as another name of the field name, declared
// before: Google's JSON parser accepts a proto field under its
// lowerCamelCase name and under its snake_case one, so both are the same
// field and may not both be present.
func (f *Fields) Alias(name, alias string) *Fields {
	fd := f.byFold[string(appendFold(nil, []byte(name)))]
	if fd == nil || fd.names[0] != name {
		panic(fmt.Sprintf("llm.Fields: alias %q of undeclared field %q", alias, name))
	}
	key := string(appendFold(nil, []byte(alias)))
	if f.byFold[key] != nil {
		panic(fmt.Sprintf("llm.Fields: alias %q is already declared", alias))
	}
	fd.names = append(fd.names, alias)
	f.byFold[key] = fd
	f.folds = append(f.folds, newFoldedName(key, fd))
	return f
}

func (f *Fields) add(name string, inner *Fields) {
	key := string(appendFold(nil, []byte(name)))
	if f.byFold[key] != nil {
		panic(fmt.Sprintf("llm.Fields: field %q is already declared", name))
	}
	if f.count == maxFields {
		panic(fmt.Sprintf("llm.Fields: more than %d fields", maxFields))
	}
	if f.visit && f.count == maxVisited {
		panic(fmt.Sprintf("llm.Fields: more than %d fields in visited Fields", maxVisited))
	}
	fd := &field{bit: 1 << f.count, slot: f.count, names: []string{name}, inner: inner}
	f.byFold[key] = fd
	f.folds = append(f.folds, newFoldedName(key, fd))
	f.count++
}

// Visit declares that a [Scan] stops after each object or array these
// Fields describe, and notes where the fields of each such object are:
// the wire format then reads them in the pass that checks them. Visited
// Fields have at most 16 fields.
func (f *Fields) Visit() *Fields {
	if f.count > maxVisited {
		panic(fmt.Sprintf("llm.Fields: more than %d fields in visited Fields", maxVisited))
	}
	f.visit = true
	return f
}

// Slot returns the place of the field declared as name among f's fields,
// by which [Scan.Member] finds it in a visited object. It panics when f
// declares no such field: slots are looked up once, when a wire format
// is initialised.
func (f *Fields) Slot(name string) int {
	fd := f.declared(name)
	if fd == nil {
		panic(fmt.Sprintf("llm.Fields: no field %q", name))
	}
	return fd.slot
}

// lookup returns the field whose names include one that folds to folded
// (a key already case-folded by appendFold), or nil.
func (f *Fields) lookup(folded []byte) *field {
	if f == nil {
		return nil
	}
	if len(f.folds) <= maxListed {
		for _, n := range f.folds {
			if n.fold == string(folded) {
				return n.fd
			}
		}
		return nil
	}
	return f.byFold[string(folded)]
}

// lookupShort is lookup for a key whose fold is eight bytes or fewer,
// packed by packKey: one comparison of words for each name, which is
// quicker than hashing the key among as many as maxShortListed.
func (f *Fields) lookupShort(folded []byte, packed uint64) *field {
	if f == nil {
		return nil
	}
	if len(f.folds) <= maxShortListed {
		for _, n := range f.folds {
			if n.packed == packed {
				return n.fd
			}
		}
		return nil
	}
	return f.byFold[string(folded)]
}

// declared returns the field declared as name, or nil.
func (f *Fields) declared(name string) *field {
	if f == nil {
		return nil
	}
	// By comparison, rather than folding name to look it up: an edit
	// names the fields on its way for every request.
	for _, n := range f.folds {
		if n.fd.names[0] == name {
			return n.fd
		}
	}
	return nil
}

// is reports whether key is one of the field's names, exactly.
func (fd *field) is(key []byte) bool {
	for _, n := range fd.names {
		if string(key) == n {
			return true
		}
	}
	return false
}

// nameIndex returns the index of key among the field's names, or -1.
func (fd *field) nameIndex(key string) int {
	for i, n := range fd.names {
		if key == n {
			return i
		}
	}
	return -1
}

// TopFields returns the named top-level fields of doc, in the order of
// names, reading the body once: a Get per field would rescan a body that
// can be megabytes (a long prompt sits before the fields that follow it).
// Keys are compared after unescaping, as providers decode them. A body
// that [CheckBody] accepted has each key once; were a name repeated, the
// first value would be returned, as gjson's Get would. The results are
// stored in out when it is large enough, so that a caller can keep them
// on its stack.
// doc must be a body CheckBody accepted: it is read with ForEach.
func TopFields(doc gjson.Result, out []gjson.Result, names ...string) []gjson.Result {
	if cap(out) < len(names) {
		out = make([]gjson.Result, len(names))
	}
	out = out[:len(names)]
	clear(out)
	ForEach(doc, func(k, v gjson.Result) bool {
		for i, n := range names {
			if k.Str == n && !out[i].Exists() {
				out[i] = v
			}
		}
		return true
	})
	return out
}
