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
	// short finds a short key among folds in one probe.
	short shortNames
	// visit is set by Visit.
	visit bool
}

// foldedName is an entry of Fields.folds.
type foldedName struct {
	fold string
	// packed is fold as packKey packs a short key, or longName; exact
	// is the name itself packed so, or longName, for telling at once
	// that a plain short key is the name and not the name in another
	// case.
	packed, exact uint64
	fd            *field
}

// longName is the packed form of a name longer than eight bytes, which
// no short key packs to: its bytes would have to be 0xff, which UTF-8
// never has.
const longName = ^uint64(0)

// newFoldedName returns the entry of name, folded to fold, for field fd.
func newFoldedName(name, fold string, fd *field) foldedName {
	return foldedName{fold: fold, packed: packName(fold), exact: packName(name), fd: fd}
}

// packName returns name as packKey packs a short key, or longName.
func packName(name string) uint64 {
	if len(name) > 8 {
		return longName
	}
	var w [8]byte
	copy(w[:], name)
	return packKey(w[:], len(name))
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
	f.folds = append(f.folds, newFoldedName(alias, key, fd))
	f.short.build(f.folds)
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
	f.folds = append(f.folds, newFoldedName(name, key, fd))
	f.short.build(f.folds)
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

// Names returns every name f declares, aliases included, in the order
// they were declared.
func (f *Fields) Names() []string {
	names := make([]string, 0, len(f.folds))
	for _, n := range f.folds {
		for _, name := range n.fd.names {
			if string(appendFold(nil, []byte(name))) == n.fold {
				names = append(names, name)
				break
			}
		}
	}
	return names
}

// Inner returns the Fields of the value of the field declared as name:
// nil for a field read whole, or for a name f does not declare.
func (f *Fields) Inner(name string) *Fields {
	if fd := f.declared(name); fd != nil {
		return fd.inner
	}
	return nil
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
// packed by packKey: one probe of the short names' table, or one
// comparison of words for each name, either quicker than hashing the key
// among as many as maxShortListed. It returns the field's name that the
// key folds to as newFoldedName packs it (exact), or longName when it
// does not tell.
func (f *Fields) lookupShort(folded []byte, packed uint64) (*field, uint64) {
	if fd, exact, ok := f.probe(packed); ok {
		return fd, exact
	}
	return f.lookupListed(folded, packed)
}

// probe is lookupShort by the short names' table, small enough to be
// inlined into the check's reading of a key; ok is false when f has no
// table, and lookupListed must look the key up.
func (f *Fields) probe(packed uint64) (fd *field, exact uint64, ok bool) {
	if f == nil || f.short.mul == 0 {
		return nil, longName, false
	}
	s := shortSlot(packed, f.short.mul)
	if f.short.packed[s] != packed {
		return nil, longName, true
	}
	n := &f.folds[f.short.index[s]]
	return n.fd, n.exact, true
}

// lookupListed is lookupShort for Fields without a table.
func (f *Fields) lookupListed(folded []byte, packed uint64) (*field, uint64) {
	if f == nil {
		return nil, longName
	}
	if len(f.folds) <= maxShortListed {
		for _, n := range f.folds {
			if n.packed == packed {
				return n.fd, n.exact
			}
		}
		return nil, longName
	}
	return f.byFold[string(folded)], longName
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
