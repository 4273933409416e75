package accounting

import (
	"strconv"
	"strings"
)

// Every admitted request holds a Reservation until it settles, the
// length of its stream, and a reservation was half a dozen allocations:
// the Reservation, its items, the store request's items, the ID and each
// limit's counter key, then the settlement's items. Made for every
// request by every stream at once, they were a good part of what the
// garbage collector had to find and free per request. A reservation of
// up to four limits (most configurations apply a few per request) is
// now one allocation with room for its items and its settlement's, and
// one string holding its ID and its counter keys.

// maxInlineItems is the most items a reservation holds in its own
// allocation; one with more has them allocated apart.
const maxInlineItems = 4

// itemSpace is where a reservation's items live: its own, its request
// to the store's, and its settlement's (filled at settlement). Each is
// empty, with room for the items.
type itemSpace struct {
	kept   []reservedItem
	items  []ReserveItem
	settle []SettleItem
}

// newReservation returns an empty Reservation with room for n items,
// allocated with it when n is at most maxInlineItems.
func newReservation(n int) (*Reservation, itemSpace) {
	switch n {
	case 0:
		return new(Reservation), itemSpace{}
	case 1:
		p := new(struct {
			r      Reservation
			kept   [1]reservedItem
			items  [1]ReserveItem
			settle [1]SettleItem
		})
		return &p.r, itemSpace{p.kept[:0], p.items[:0], p.settle[:0]}
	case 2:
		p := new(struct {
			r      Reservation
			kept   [2]reservedItem
			items  [2]ReserveItem
			settle [2]SettleItem
		})
		return &p.r, itemSpace{p.kept[:0], p.items[:0], p.settle[:0]}
	case 3:
		p := new(struct {
			r      Reservation
			kept   [3]reservedItem
			items  [3]ReserveItem
			settle [3]SettleItem
		})
		return &p.r, itemSpace{p.kept[:0], p.items[:0], p.settle[:0]}
	case maxInlineItems:
		p := new(struct {
			r      Reservation
			kept   [maxInlineItems]reservedItem
			items  [maxInlineItems]ReserveItem
			settle [maxInlineItems]SettleItem
		})
		return &p.r, itemSpace{p.kept[:0], p.items[:0], p.settle[:0]}
	}
	return new(Reservation), itemSpace{
		kept:   make([]reservedItem, 0, n),
		items:  make([]ReserveItem, 0, n),
		settle: make([]SettleItem, 0, n),
	}
}

// reservationKeys returns, in one string, the reservation ID made of
// prefix and seq and then the counter key of each of kept's limits for
// attrs, and the end of the ID and of each key in it (ends[i] ends
// kept[i]'s key). CounterKey(kept[i].limit, attrs) is
// s[ends[i-1]:ends[i]], the ID s[:ends[-1]] as idEnd.
func reservationKeys(prefix string, seq uint64, kept []reservedItem, attrs Attributes, ends []int) (s string, idEnd int) {
	var buf [16]byte
	num := strconv.AppendUint(buf[:0], seq, 36)
	n := len(prefix) + len(num)
	for i := range kept {
		n += counterKeySize(kept[i].limit, attrs)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(prefix)
	b.Write(num)
	idEnd = b.Len()
	for i := range kept {
		writeCounterKey(&b, kept[i].limit, attrs)
		ends[i] = b.Len()
	}
	return b.String(), idEnd
}
