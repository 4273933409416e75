package llm

// shortNames finds the name a short key folds to in one probe: a table
// of the names of eight bytes or fewer, placed by a multiplicative hash
// of their packed form (packKey) whose multiplier is chosen, when the
// Fields are built, so that no two of them share a slot. A check looks
// up every key of a body, and one probe is quicker than comparing the
// key with each name in turn. The names are the wire format's, never a
// request's, so nothing a client sends can make them collide; a key
// that lands on another name's slot costs one comparison more.
type shortNames struct {
	// mul is the multiplier, zero while no table is built (Fields with
	// names no multiplier tried separates are then looked up in a list).
	mul uint64
	// packed holds, by slot, the packed fold of the short name there,
	// or longName, which no short name packs to; index holds the
	// name's index in Fields.folds.
	packed [1 << shortBits]uint64
	index  [1 << shortBits]uint8
}

// shortBits is the number of bits of a slot's index: 128 slots for at
// most maxShortListed names keep a separating multiplier easy to find.
const shortBits = 7

// maxMultipliers bounds the multipliers tried for one Fields.
const maxMultipliers = 1 << 14

// slot returns the index of packed's slot under multiplier mul.
func shortSlot(packed, mul uint64) uint64 { return (packed * mul) >> (64 - shortBits) }

// build places folds' short names, or leaves the table unbuilt when
// there are too many, or no multiplier tried separates them. The
// multipliers are a fixed sequence, so that a Fields is built the same
// way every time.
func (t *shortNames) build(folds []foldedName) {
	*t = shortNames{}
	if len(folds) > maxShortListed {
		return
	}
	state := uint64(0x9e3779b97f4a7c15)
	for range maxMultipliers {
		// splitmix64's step: a well-mixed odd multiplier.
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		if t.place(folds, (z^z>>31)|1) {
			return
		}
	}
	*t = shortNames{}
}

// place places folds' short names by multiplier mul, and reports
// whether no two share a slot.
func (t *shortNames) place(folds []foldedName, mul uint64) bool {
	t.mul = mul
	for s := range t.packed {
		t.packed[s] = longName
	}
	for k, n := range folds {
		if n.packed == longName {
			continue
		}
		s := shortSlot(n.packed, mul)
		if t.packed[s] != longName {
			return false
		}
		t.packed[s], t.index[s] = n.packed, uint8(k)
	}
	return true
}
