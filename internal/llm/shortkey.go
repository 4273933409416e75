package llm

import "math/bits"

// shortKey is key for the usual key, in fewer steps than anyKey takes
// for it: a key of at most eight bytes of ASCII, without escapes or
// control characters, that is new in an object whose keys are in the
// shared list (see smallObject), and that is either no field's name or
// one of a field's names as declared, for a field the object has not had
// yet. For any other key, and for a key
// whose colon is missing, it changes nothing and reports false; anyKey
// then reads the key, and says what is wrong with it.
//
// The key's eight bytes are loaded as one word, and packed (see packKey)
// both as they are and folded. The folded word is the key's hash in the
// list, and tells keys of one length apart exactly, so an object's
// earlier short keys are compared by word alone; a hash that matches (a
// repeat, or a long key's hash that happens to equal the word) is left
// to anyKey, which compares the keys themselves. A field's name is
// matched by the same word, and the key is that name, not another case
// of it, when its raw word is the name's.
//
// TestShortKey and FuzzShortKey hold it to anyKey.
func (c *checker) shortKey(i int) (int, *Fields, bool) {
	b := c.body
	if c.noShortKeys || i+10 > len(b) || b[i] != '"' {
		return 0, nil, false
	}
	raw := load64(View(b), i+1)
	n := bits.TrailingZeros64(stringStops(raw)|raw&msbs) >> 3
	end := i + 1 + n // the closing quote
	if b[end] != '"' {
		return 0, nil, false
	}
	// The colon, and the value after it.
	j := end + 1
	if j < len(b) && b[j] == ':' {
		j++
	} else if j = skipSpace(b, j); j < len(b) && b[j] == ':' {
		j++
	} else {
		return 0, nil, false
	}
	if j < len(b) && b[j] <= ' ' {
		j = skipSpace(b, j)
	}
	top := c.top()
	if top.table != nil || c.nkeys >= inlineKeys {
		return 0, nil, false
	}
	mask, length := ^uint64(0)>>(64-8*n), uint64(n)<<60
	packed := foldWord(raw)&mask ^ length
	listed := c.keys[top.keys:c.nkeys]
	for _, e := range listed {
		if e.hash == packed {
			return 0, nil, false
		}
	}
	var fd *field
	if f := top.fields; f != nil {
		if f.short.mul == 0 {
			return 0, nil, false
		}
		s := shortSlot(packed, f.short.mul)
		if f.short.packed[s] == packed {
			name := &f.folds[f.short.index[s]]
			if name.exact != raw&mask^length || top.seen&name.fd.bit != 0 {
				return 0, nil, false
			}
			fd = name.fd
		}
	}
	// The key is new and read: it is listed, and the rest is as in
	// anyKey.
	c.probes += len(listed)
	c.keys[c.nkeys] = keyEntry{hash: packed, off: i}
	c.nkeys++
	if c.nkeys-top.keys > smallObject {
		c.moveToTable(top)
	}
	top.lastKey = i
	var inner *Fields
	if fd != nil {
		top.seen |= fd.bit
		inner = fd.inner
		if top.frame >= 0 {
			c.memberStarts(top, fd, j)
		}
	}
	if c.capture.on && c.depth == 1 {
		c.capture.valueStarts(b[i+1:end], j)
	}
	return j, inner, true
}
