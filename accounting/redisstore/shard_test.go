package redisstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/storetest"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// recordValues returns the values of reservation id's records (or
// tombstones): the one under its record key, or on the sharded layout
// every slot's, found by SCAN on every master.
func recordValues(t testing.TB, s *Store, id string) [][]byte {
	t.Helper()
	ctx := context.Background()
	if s.shardBy == "" {
		b, err := s.client.Get(ctx, s.recordKey(id)).Bytes()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		if err != nil {
			t.Fatalf("record %s: %v", id, err)
		}
		return [][]byte{b}
	}
	var out [][]byte
	for _, key := range shardedKeys(t, s, "*}"+globEscape(RecordKeyPrefix+id)) {
		b, err := s.client.Get(ctx, key).Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			t.Fatalf("record %s: %v", key, err)
		}
		out = append(out, b)
	}
	return out
}

// shardedKeys returns every key matching pattern on every master the
// Store writes to.
func shardedKeys(t testing.TB, s *Store, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	scanners, err := s.scanners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, sc := range scanners {
		iter := sc.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("SCAN %s: %v", pattern, err)
		}
	}
	return keys
}

func TestCRC16(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want uint16
	}{
		// The CRC-16/XMODEM check value, which Redis Cluster's
		// specification gives for its CRC16.
		{"check value", "123456789", 0x31c3},
		{"empty", "", 0},
		{"one byte", "A", 0x58e5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := crc16(tt.in); got != tt.want {
				t.Errorf("crc16(%q): got %#04x, want %#04x", tt.in, got, tt.want)
			}
		})
	}
}

// keySlotCases are keys whose slot TestShardedCluster also asks CLUSTER
// KEYSLOT for: the hash tag rules, braces anywhere.
var keySlotCases = []struct {
	name string
	key  string
	want int
}{
	{"plain", "foo", 12182},
	{"plain 2", "bar", 5061},
	{"tag", "{user1000}.following", 3443},
	{"same tag", "{user1000}.followers", 3443},
	{"tag only", "{user1000}", 3443},
	{"empty tag hashes the whole key", "foo{}{bar}", 8363},
	{"first brace pair", "foo{{bar}}zap", 4015},
	{"second tag ignored", "foo{bar}{zap}", 5061},
	{"open brace only", "{abc", 444},
	{"close brace first", "}abc{de}", 15341},
	{"tokenwarden key", "{0a1b2c3d}tw2:f3600000:5:daily6:tenant4:acme", 1418},
	{"one byte", "A", 6373},
}

func TestKeySlot(t *testing.T) {
	for _, tt := range keySlotCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := keySlot(tt.key); got != tt.want {
				t.Errorf("keySlot(%q): got %d, want %d", tt.key, got, tt.want)
			}
		})
	}
}

// TestSlotTags: every slot has a tag, and the tag hashes to its slot.
func TestSlotTags(t *testing.T) {
	tags := slotTags()
	for slot, tag := range tags {
		if tag == "" || keySlot("{"+tag+"}x") != slot {
			t.Fatalf("slot %d: tag %q hashes to slot %d", slot, tag, keySlot("{"+tag+"}x"))
		}
	}
}

// TestShardTag pins where the sharded layout puts keys: one principal's
// counters share a tag whatever the limit, other counters get their
// own, and no value, braces included, moves a key out of its tag.
func TestShardTag(t *testing.T) {
	s := &Store{shardBy: "tenant"}
	key := func(name string, scope ...string) string {
		l := accounting.Limit{Name: name, Algorithm: accounting.FixedWindow, Window: time.Hour}
		var attrs accounting.Attributes
		for i := 0; i < len(scope); i += 2 {
			l.Scope = append(l.Scope, scope[i])
			attrs = append(attrs, accounting.Attribute{Name: scope[i], Value: scope[i+1]})
		}
		return accounting.CounterKey(&l, attrs)
	}
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"one tenant, two limits", key("daily", "tenant", "acme"), key("monthly", "tenant", "acme"), true},
		{"one tenant, another scope too", key("daily", "tenant", "acme"), key("per-user", "user", "u1", "tenant", "acme"), true},
		{"two tenants", key("daily", "tenant", "acme"), key("daily", "tenant", "globex"), false},
		{"global limits apart", key("global"), key("global-2"), false},
		{"per-user limits apart", key("per-user", "user", "u1"), key("per-user", "user", "u2"), false},
		{"tenant value with braces", key("daily", "tenant", "{x}"), key("monthly", "tenant", "{x}"), true},
		{"a tenant named like another's field", key("daily", "tenant", "6:tenant4:acme"), key("daily", "tenant", "acme"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ra, rb := s.RedisKey(tt.a), s.RedisKey(tt.b)
			if same := s.ShardTag(tt.a) == s.ShardTag(tt.b); same != tt.same {
				t.Errorf("tags of %q and %q: got same %v, want %v", ra, rb, same, tt.same)
			}
			if tt.same && keySlot(ra) != keySlot(rb) {
				t.Errorf("slots of %q and %q: got %d and %d, want one", ra, rb, keySlot(ra), keySlot(rb))
			}
			for _, k := range []string{tt.a, tt.b} {
				r := s.RedisKey(k)
				if !strings.HasSuffix(r, "}"+k) || len(r) != len(k)+shardTagLen+2 || strings.ContainsAny(r[1:shardTagLen+1], "{}") {
					t.Errorf("RedisKey(%q): got %q, want {8 hex digits} then the key", k, r)
				}
			}
		})
	}
	if got := (&Store{}).RedisKey("tw2:f1:1:a"); got != "tw2:f1:1:a" {
		t.Errorf("RedisKey without shard_by: got %q, want the key itself", got)
	}
}

// TestGroupsOrder: the principal's slot comes first, then the others by
// slot number.
func TestGroupsOrder(t *testing.T) {
	s := &Store{shardBy: "tenant"}
	tenant := accounting.Limit{Name: "daily", Algorithm: accounting.FixedWindow, Window: time.Hour, Scope: []string{"tenant"}}
	attrs := accounting.Attributes{{Name: "tenant", Value: "acme"}}
	keys := []string{fixedCounter("g1", 1, time.Hour).Key, tenant.Counter(attrs).Key, fixedCounter("g2", 1, time.Hour).Key, fixedCounter("g3", 1, time.Hour).Key}
	gs := s.groups(keys)
	if len(gs) < 2 || !gs[0].principal || !slices.Equal(gs[0].idx, []int{1}) {
		t.Fatalf("groups: got %+v, want the tenant's item (1) alone first", gs)
	}
	for i := 2; i < len(gs); i++ {
		if gs[i-1].slot >= gs[i].slot {
			t.Errorf("groups: got slot %d before %d, want ascending after the principal's", gs[i-1].slot, gs[i].slot)
		}
	}
}

// TestContractSharded runs the contract suites on the sharded layout on
// one Redis: its counters are global, so every multi-item reservation is
// made in steps, one per slot (one Redis holds every slot).
func TestContractSharded(t *testing.T) {
	srv := redistest.Start(t)
	admin := adminClient(t, srv)
	newHarness := func(t *testing.T) storetest.Harness {
		if err := admin.FlushDB(context.Background()).Err(); err != nil {
			t.Fatalf("FLUSHDB: %v", err)
		}
		return harness(t, newStore(t, srv, Options{ShardBy: "tenant"}))
	}
	t.Run("store", func(t *testing.T) { storetest.Run(t, newHarness) })
	t.Run("inspect", func(t *testing.T) { storetest.RunInspect(t, newHarness) })
}
