package llm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The keys of an object are checked as they are read: each is decoded and
// case-folded, hashed (with the checker's random seed), and compared with
// the object's earlier keys. An object's first smallObject keys go in a
// list shared by all open objects, and a new key is compared with the
// hash of each; past smallObject, the object moves its keys to a hash
// table of its own. Either way only keys whose hashes match are decoded
// again and compared in full, which for distinct keys is almost never.

// smallObject is how many keys an object has before it moves them to a
// table.
const smallObject = 16

// keyEntry is a key of an open object in the shared list.
type keyEntry struct {
	hash uint64 // of the folded key, as key makes it for the list
	off  int    // of the key's opening quote
}

// keyAt returns key k of the shared list.
func (c *checker) keyAt(k int) keyEntry {
	if k < inlineKeys {
		return c.keys[k]
	}
	return c.moreKeys[k-inlineKeys]
}

func (c *checker) addKey(e keyEntry) {
	if c.nkeys < inlineKeys {
		c.keys[c.nkeys] = e
	} else {
		c.moreKeys = append(c.moreKeys[:c.nkeys-inlineKeys], e)
	}
	c.nkeys++
}

// anyKey reads the member key at i, its colon and the space around it,
// and returns where the value starts and what is read in it. It reads
// any key; run tries shortKey first, which reads the usual key in fewer
// steps.
func (c *checker) anyKey(i int) (int, *Fields, error) {
	b := c.body
	if i >= len(b) || b[i] != '"' {
		return i, nil, c.syntaxError(i)
	}
	var exact, fold []byte
	var end int
	var shortFold [8]byte
	// A short key is packed into a word (see packKey), by which it is
	// listed and looked up.
	var short bool
	var packed uint64
	// rawPacked is the key itself packed, for a plain short key, which
	// is then compared with a field's name as one word; longName else.
	rawPacked := longName
	// A key of plain ASCII (no escape, no control character) of at
	// most eight bytes, the usual kind, is read and folded from one
	// load: n is the length of the plain run the word starts with (a
	// word with no stop has its trailing zeros counted as 64, a length
	// of eight), and the key is short when its closing quote follows.
	// Written out rather than called: every key of a body comes here.
	var n int
	var raw uint64
	if i+10 <= len(b) {
		raw = load64(View(b), i+1)
		n = bits.TrailingZeros64(stringStops(raw)|raw&msbs) >> 3
		short = b[i+1+n] == '"'
	}
	if short {
		exact, end = b[i+1:i+1+n], i+2+n
		w := foldWord(raw)
		binary.LittleEndian.PutUint64(shortFold[:], w)
		mask, length := ^uint64(0)>>(64-8*n), uint64(n)<<60
		fold, packed, rawPacked = shortFold[:n], w&mask^length, raw&mask^length
	} else {
		// Room on the stack for a longer key.
		var foldBuf, exactBuf [64]byte
		var err error
		if exact, fold, end, err = c.readKey(i, exactBuf[:0], foldBuf[:0]); err != nil {
			return i, nil, err
		}
		if short = len(fold) <= 8 && cap(fold) >= 8; short {
			packed = packKey(fold[:8], len(fold))
		}
	}
	top := c.top()
	if top.table != nil {
		if earlier := c.tableAdd(top, maphash.Bytes(c.seed, fold), fold, i); earlier >= 0 {
			return i, nil, c.duplicateError(earlier, exact)
		}
	} else {
		// The hash by which the list of a small object holds the key.
		h := packed
		if !short {
			h = maphash.Bytes(c.seed, fold)
		}
		if earlier := c.findListed(top, h, fold); earlier >= 0 {
			return i, nil, c.duplicateError(earlier, exact)
		}
		c.addKey(keyEntry{hash: h, off: i})
		if c.nkeys-top.keys > smallObject {
			c.moveToTable(top)
		}
	}
	top.lastKey = i
	var inner *Fields
	var fd *field
	nameExact := longName // the field's name the key folds to, packed
	if short {
		// lookupShort, its probe inlined.
		var ok bool
		if fd, nameExact, ok = top.fields.probe(packed); !ok {
			fd, nameExact = top.fields.lookupListed(fold, packed)
		}
	} else {
		fd = top.fields.lookup(fold)
	}
	if fd != nil {
		// A plain short key packed as the name is the name; longName,
		// which no short key packs to, leaves it to is.
		if (rawPacked != nameExact || rawPacked == longName) && !fd.is(exact) {
			return i, nil, c.caseError(fd, exact, fold)
		}
		if top.seen&fd.bit != 0 {
			return i, nil, c.aliasError(top, fd, exact)
		}
		top.seen |= fd.bit
		inner = fd.inner
	}
	j := skipSpace(b, end)
	if j >= len(b) || b[j] != ':' {
		return j, nil, c.syntaxError(j)
	}
	j = skipSpace(b, j+1)
	if fd != nil && top.frame >= 0 {
		c.memberStarts(top, fd, j)
	}
	if c.capture.on && c.depth == 1 {
		c.capture.valueStarts(exact, j)
	}
	return j, inner, nil
}

// readKey reads the key whose opening quote is at i and returns it
// decoded and case-folded (appended to exact and fold), and where it
// ends. A key of ASCII without escapes, the usual kind, is folded as it
// is read and returned as a slice of the body.
func (c *checker) readKey(i int, exact, fold []byte) ([]byte, []byte, int, error) {
	b := c.body
	j := i + 1
	// Eight bytes at a time while they are plain ASCII, folded at once,
	// as long as fold has room for them.
	for j+8 <= len(b) && len(fold)+8 <= cap(fold) {
		w := load64(View(b), j)
		fold = binary.LittleEndian.AppendUint64(fold, foldWord(w))
		if m := stringStops(w) | w&msbs; m != 0 {
			n := bits.TrailingZeros64(m) >> 3
			fold = fold[:len(fold)-8+n]
			if b[j+n] == '"' {
				return b[i+1 : j+n], fold, j + n + 1, nil
			}
			j += n
			break
		}
		j += 8
	}
	for ; j < len(b); j++ {
		ch := b[j]
		if ch == '"' {
			return b[i+1 : j], fold, j + 1, nil
		}
		if ch == '\\' || ch < 0x20 || ch >= utf8.RuneSelf {
			break
		}
		if 'a' <= ch && ch <= 'z' {
			ch -= 'a' - 'A'
		}
		fold = append(fold, ch)
	}
	exact, end, err := c.unquote(exact, i)
	if err != nil {
		return nil, nil, end, err
	}
	return exact, appendFold(fold[:0], exact), end, nil
}

// foldWord folds the ASCII letters of w (eight bytes, little-endian) as
// appendFold does, lower case to upper. Bytes are folded correctly up to
// the first one that is not ASCII; those after it may not be, and are
// not used.
func foldWord(w uint64) uint64 {
	atLeastA := w + lsbs*(0x80-'a')      // high bit set where a byte ≥ 'a'
	aboveZ := w + lsbs*(0x80-'z'-1)      // high bit set where a byte > 'z'
	lower := (atLeastA &^ aboveZ) & msbs // the lower-case letters
	return w - lower>>2                  // 0x80>>2 is 'a'-'A'
}

// A small object's list holds a key of eight bytes or fewer, the usual
// kind, by the key itself (packKey): that is quicker than hashing it,
// and tells keys of one length apart exactly. A longer key is hashed
// with the seed. A table, which a body with many keys could otherwise
// fill with keys whose hashes it chose, hashes every key with the seed
// (see moveToTable).

// packKey returns the first n bytes of w (n at most eight), and n, in a
// word: a short key's hash in a list, and its identity among the keys
// of its length.
func packKey(w []byte, n int) uint64 {
	return binary.LittleEndian.Uint64(w)&(^uint64(0)>>(64-8*n)) ^ uint64(n)<<60
}

// findListed returns the offset of the key of the object top, in the
// shared list, that folds to fold (whose hash is h), or -1.
func (c *checker) findListed(top *level, h uint64, fold []byte) int {
	for k := top.keys; k < c.nkeys; k++ {
		c.probes++
		if e := c.keyAt(k); e.hash == h && bytes.Equal(c.foldedKey(e.off), fold) {
			return e.off
		}
	}
	return -1
}

// An object's table is open addressing with linear probing, at most half
// full. A slot holds 32 bits of the key's hash, which also place it, and
// the key's offset plus one (zero is an empty slot).

// moveToTable moves the keys of top from the shared list to a table.
func (c *checker) moveToTable(top *level) {
	const size = 4 * smallObject
	top.table, c.spare = c.spare, nil
	if cap(top.table) < size {
		top.table = make([]uint64, size)
	}
	top.table = top.table[:cap(top.table)]
	for k := top.keys; k < c.nkeys; k++ {
		// The list's hash of a short key is the key: the table hashes it
		// with the seed.
		e := c.keyAt(k)
		tableInsert(top.table, tag(maphash.Bytes(c.seed, c.foldedKey(e.off))), e.off)
	}
	top.count = c.nkeys - top.keys
	c.nkeys = top.keys
}

// tableAdd adds the key at off, which folds to fold (whose hash is h), to
// the table of top, and returns -1; or, when top already has the key,
// returns the offset of the earlier one.
func (c *checker) tableAdd(top *level, h uint64, fold []byte, off int) int {
	t := tag(h)
	mask := uint32(len(top.table) - 1)
	for s := t & mask; ; s = (s + 1) & mask {
		slot := top.table[s]
		if slot == 0 {
			top.table[s] = uint64(t)<<32 | uint64(off+1)
			break
		}
		c.probes++
		if earlier := int(uint32(slot)) - 1; uint32(slot>>32) == t && bytes.Equal(c.foldedKey(earlier), fold) {
			return earlier
		}
	}
	if top.count++; 2*top.count > len(top.table) {
		grown := make([]uint64, 2*len(top.table))
		for _, slot := range top.table {
			if slot != 0 {
				tableInsert(grown, uint32(slot>>32), int(uint32(slot))-1)
			}
		}
		top.table = grown
	}
	return -1
}

// tag is the part of a key's hash a table keeps.
func tag(h uint64) uint32 { return uint32(h ^ h>>32) }

// tableInsert puts a key known to be new in table.
func tableInsert(table []uint64, t uint32, off int) {
	mask := uint32(len(table) - 1)
	s := t & mask
	for table[s] != 0 {
		s = (s + 1) & mask
	}
	table[s] = uint64(t)<<32 | uint64(off+1)
}

// keyOffsets calls f with the offset of each key of the object top.
func (c *checker) keyOffsets(top *level, f func(off int)) {
	if top.table == nil {
		for k := top.keys; k < c.nkeys; k++ {
			f(c.keyAt(k).off)
		}
		return
	}
	for _, slot := range top.table {
		if slot != 0 {
			f(int(uint32(slot)) - 1)
		}
	}
}

// otherKey returns the key whose opening quote is at off, decoded. The
// key was read before, so it is valid.
func (c *checker) otherKey(off int) []byte {
	c.other, _, _ = c.unquote(c.other[:0], off)
	return c.other
}

// foldedKey returns the key whose opening quote is at off, case-folded.
func (c *checker) foldedKey(off int) []byte {
	c.otherFold = appendFold(c.otherFold[:0], c.otherKey(off))
	return c.otherFold
}

// unquote appends to out the string whose opening quote is at i, decoded
// as encoding/json decodes it, and returns where the string ends. It
// refuses what encoding/json refuses, and invalid UTF-8; an escaped
// surrogate that is not half of a pair becomes U+FFFD, as in
// encoding/json.
func (c *checker) unquote(out []byte, i int) ([]byte, int, error) {
	b := c.body
	for j := i + 1; ; {
		if j >= len(b) {
			return out, j, c.syntaxError(j)
		}
		switch ch := b[j]; {
		case ch == '"':
			return out, j + 1, nil
		case ch == '\\':
			if j+1 >= len(b) {
				return out, j, c.syntaxError(len(b))
			}
			switch e := b[j+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := rune(-1)
				if j+6 <= len(b) {
					r = hex4(b[j+2 : j+6])
				}
				if r < 0 {
					return out, j, c.escapeError(j)
				}
				j += 6
				if utf16.IsSurrogate(r) {
					low := rune(-1)
					if j+6 <= len(b) && b[j] == '\\' && b[j+1] == 'u' {
						low = hex4(b[j+2 : j+6])
					}
					if pair := utf16.DecodeRune(r, low); pair != utf8.RuneError {
						r = pair
						j += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return out, j, c.escapeError(j)
			}
			j += 2
		case ch < 0x20:
			return out, j, c.controlError(j)
		case ch < utf8.RuneSelf:
			out = append(out, ch)
			j++
		default:
			r, n := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && n == 1 {
				return out, j, c.utf8Error(j)
			}
			out = append(out, b[j:j+n]...)
			j += n
		}
	}
}

// hex4 returns the value of four hex digits, or -1.
func hex4(p []byte) rune {
	var r rune
	for _, ch := range p {
		switch {
		case '0' <= ch && ch <= '9':
			ch -= '0'
		case 'a' <= ch && ch <= 'f':
			ch -= 'a' - 10
		case 'A' <= ch && ch <= 'F':
			ch -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(ch)
	}
	return r
}

// The errors of keys. Their text goes to the client, after "Invalid
// request: ".

// duplicateError reports the current key, exact, as a repeat of the key
// at offset earlier.
func (c *checker) duplicateError(earlier int, exact []byte) error {
	other := c.otherKey(earlier)
	same := bytes.Equal(other, exact)
	first, key := quoteKey(other), quoteKey(exact)
	if same {
		return fmt.Errorf("duplicate key %s in the request body%s", key, c.where())
	}
	return fmt.Errorf("duplicate key %s in the request body%s: %s and %s are one key to providers that ignore case",
		key, c.where(), first, key)
}

// caseError reports the current key, exact, folded to fold, as the field
// fd in another case.
func (c *checker) caseError(fd *field, exact, fold []byte) error {
	name := fd.names[0]
	for _, n := range fd.names {
		if bytes.Equal(appendFold(nil, []byte(n)), fold) {
			name = n
		}
	}
	return fmt.Errorf("key %s in the request body%s is %q in another case: providers disagree on whether it is that field",
		quoteKey(exact), c.where(), name)
}

// aliasError reports the current key, exact, as another name of the
// field fd, which the object top already has.
func (c *checker) aliasError(top *level, fd *field, exact []byte) error {
	other := fd.names[0]
	c.keyOffsets(top, func(off int) {
		if key := c.otherKey(off); fd.is(key) && !bytes.Equal(key, exact) {
			other = string(key)
		}
	})
	return fmt.Errorf("duplicate field in the request body%s: %s and %q are the same field", c.where(), quoteKey(exact), other)
}

// where describes the innermost open object: nothing for the body itself,
// else " at " and its path, such as " at messages[2].content[0]".
func (c *checker) where() string {
	if c.depth <= 1 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString(" at ")
	for d := 0; d < c.depth-1; d++ {
		lv := c.level(d)
		if lv.array {
			sb.WriteString("[" + strconv.Itoa(lv.element) + "]")
			continue
		}
		if d > 0 {
			sb.WriteByte('.')
		}
		if key := c.otherKey(lv.lastKey); plainKey(key) {
			sb.Write(key)
		} else {
			sb.WriteString(quoteKey(key))
		}
	}
	return sb.String()
}

// plainKey reports whether key reads unambiguously in a path unquoted.
func plainKey(key []byte) bool {
	if len(key) == 0 || len(key) > maxQuotedKey {
		return false
	}
	for _, ch := range key {
		if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '_' || ch == '-') {
			return false
		}
	}
	return true
}

// maxQuotedKey bounds the bytes of a key an error message repeats.
const maxQuotedKey = 64

// quoteKey quotes key for an error message, shortened to maxQuotedKey
// bytes.
func quoteKey(key []byte) string {
	if len(key) <= maxQuotedKey {
		return strconv.Quote(string(key))
	}
	n := maxQuotedKey
	for n > 0 && !utf8.RuneStart(key[n]) {
		n--
	}
	return strconv.Quote(string(key[:n])) + "…"
}
