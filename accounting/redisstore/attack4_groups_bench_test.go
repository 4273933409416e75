package redisstore

import (
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// BenchmarkGroupsTop splits the keys of the largest Top
// (accounting.MaxTopScan counters, one per tenant) by slot, as Peek on
// the sharded layout does: they fall in nearly every one of the 16,384
// slots.
func BenchmarkGroupsTop(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	b.Cleanup(func() { _ = client.Close() })
	s, err := NewFromClient(client, Options{ShardBy: "tenant"})
	if err != nil {
		b.Fatal(err)
	}
	lim := accounting.Limit{Name: "tpm", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Limit: 1000, Window: 60e9}
	keys := make([]string, accounting.MaxTopScan)
	for i := range keys {
		keys[i] = accounting.CounterKey(&lim, accounting.Attributes{{Name: "tenant", Value: "t" + strconv.Itoa(i)}})
	}
	for b.Loop() {
		if gs := s.groups(keys); len(gs) < slotCount/2 {
			b.Fatalf("got %d slots, want most of %d", len(gs), slotCount)
		}
	}
}

// Past the slots groups looks through, it indexes them: each key is
// still in the one group of its slot, in the order of the keys, and
// the groups in step order (principal first, then by slot).
func TestGroupsManySlots(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	s, err := NewFromClient(client, Options{ShardBy: "tenant"})
	if err != nil {
		t.Fatal(err)
	}
	scoped := accounting.Limit{Name: "tpm", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Limit: 1000, Window: 60e9}
	global := accounting.Limit{Name: "rpm", Dimension: accounting.Requests, Scope: []string{"user"}, Limit: 1000, Window: 60e9}
	var keys []string
	for i := range 3000 {
		// Each tenant twice, so that later keys find their slot's group.
		for range 2 {
			keys = append(keys, accounting.CounterKey(&scoped, accounting.Attributes{{Name: "tenant", Value: "t" + strconv.Itoa(i%1500)}}))
		}
		keys = append(keys, accounting.CounterKey(&global, accounting.Attributes{{Name: "user", Value: "u" + strconv.Itoa(i)}}))
	}
	gs := s.groups(keys)
	seen := make([]int, len(keys))
	slots := make(map[int]bool)
	for n, g := range gs {
		if slots[g.slot] {
			t.Fatalf("slot %d: got two groups, want one", g.slot)
		}
		slots[g.slot] = true
		if n > 0 {
			prev := gs[n-1]
			if prev.principal == g.principal && prev.slot > g.slot || !prev.principal && g.principal {
				t.Errorf("group %d (slot %d, principal %v) after slot %d (principal %v): want principal first, then by slot", n, g.slot, g.principal, prev.slot, prev.principal)
			}
		}
		for m, i := range g.idx {
			seen[i]++
			if got := keySlot(s.RedisKey(keys[i])); got != g.slot {
				t.Errorf("key %d: in the group of slot %d, want its slot %d", i, g.slot, got)
			}
			if m > 0 && g.idx[m-1] >= i {
				t.Errorf("slot %d: keys %v out of order", g.slot, g.idx)
			}
		}
	}
	for i, n := range seen {
		if n != 1 {
			t.Errorf("key %d: in %d groups, want 1", i, n)
		}
	}
}
