package accounting

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReservationKeys: the one string a reservation's ID and keys share
// holds exactly the ID and, for each limit, CounterKey's key.
func TestReservationKeys(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	attrs := Attributes{{Name: "tenant", Value: "a:b"}, {Name: "user", Value: ""}, {Name: "team", Value: "ünï"}}
	lim := func(name string, scope ...string) *Limit {
		return &Limit{Name: name, Scope: scope, Algorithm: FixedWindow, Window: time.Minute}
	}
	many := make([]*Limit, 10)
	for i := range many {
		many[i] = lim("l"+strconv.Itoa(i), "tenant", "user")
	}
	for _, tc := range []struct {
		name   string
		seq    uint64
		limits []*Limit
	}{
		{"none", 1, nil},
		{"one", 35, []*Limit{lim("rpm", "tenant")}},
		{"scopes", 1 << 40, []*Limit{lim("rpm", "tenant"), lim("tpm", "tenant", "user", "team"), lim("global")}},
		{"calendar in a zone", ^uint64(0), []*Limit{{Name: "month", Scope: []string{"tenant"}, Algorithm: FixedWindow,
			Calendar: CalendarMonth, Location: tokyo}}},
		{"more than the stack holds", 7, many},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kept := make([]reservedItem, len(tc.limits))
			for i, l := range tc.limits {
				kept[i].limit = l
			}
			ends := make([]int, len(kept))
			s, idEnd := reservationKeys("0123456789abcdef-", tc.seq, kept, attrs, ends)
			if want := "0123456789abcdef-" + strconv.FormatUint(tc.seq, 36); s[:idEnd] != want {
				t.Errorf("got ID %q, want %q", s[:idEnd], want)
			}
			start := idEnd
			for i, l := range tc.limits {
				if got, want := s[start:ends[i]], CounterKey(l, attrs); got != want {
					t.Errorf("key %d: got %q, want %q", i, got, want)
				}
				start = ends[i]
			}
			if start != len(s) {
				t.Errorf("got %d bytes after the last key, want none: %q", len(s)-start, s[start:])
			}
			if strings.Contains(s[:idEnd], ":") {
				t.Errorf("got ID %q, want no key in it", s[:idEnd])
			}
		})
	}
}

// TestNewReservationRoom: a reservation has room for exactly its items,
// in its own allocation up to maxInlineItems.
func TestNewReservationRoom(t *testing.T) {
	for n := range maxInlineItems + 3 {
		r, space := newReservation(n)
		if r == nil {
			t.Fatalf("%d items: got no reservation", n)
		}
		if len(space.kept) != 0 || len(space.items) != 0 || len(space.settle) != 0 {
			t.Errorf("%d items: got lengths %d, %d, %d, want empty", n, len(space.kept), len(space.items), len(space.settle))
		}
		if cap(space.kept) != n || cap(space.items) != n || cap(space.settle) != n {
			t.Errorf("%d items: got room for %d, %d, %d, want %d", n, cap(space.kept), cap(space.items), cap(space.settle), n)
		}
		allocs := testing.AllocsPerRun(10, func() { newReservation(n) })
		want := 1.0
		if n > maxInlineItems {
			want = 4
		}
		if allocs != want {
			t.Errorf("%d items: got %.0f allocations, want %.0f", n, allocs, want)
		}
	}
}
