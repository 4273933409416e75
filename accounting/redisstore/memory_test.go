package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestMemoryPerKey measures with MEMORY USAGE what one counter of each
// algorithm costs in Redis (key name, value and overhead included), for
// a typical key: a limit scoped by tenant and user, each charged by a
// reservation still in flight (which the counter keeps a piece for), and
// what a reservation's record costs while its request is in flight. It
// logs the
// figures (go test -run MemoryPerKey -v) and fails only if a key stops
// using a compact encoding or grows past a generous bound.
func TestMemoryPerKey(t *testing.T) {
	srv := redistest.Start(t)
	admin := adminClient(t, srv)
	s := newStore(t, srv, Options{})
	ctx := context.Background()
	s.frozen.Store(time.Date(2026, time.November, 30, 12, 0, 0, 0, time.UTC).UnixMicro())
	attrs := accounting.Attributes{{Name: "tenant", Value: "acme-corp"}, {Name: "user", Value: "user-000042"}}

	mk := func(alg accounting.Algorithm, cal accounting.Calendar) accounting.Counter {
		l := accounting.Limit{Name: "tenant-tpm", Scope: []string{"tenant", "user"}, Algorithm: alg, Calendar: cal, Limit: 1_000_000, Window: time.Minute}
		return l.Counter(attrs)
	}
	charge := func(c accounting.Counter, amount int64) accounting.CounterState {
		res, err := s.Reserve(ctx, accounting.ReserveRequest{ID: "m", Items: []accounting.ReserveItem{{Counter: c, Amount: amount}}})
		if err != nil || !res.Admitted {
			t.Fatalf("reserve: admitted %v, err %v", res.Admitted, err)
		}
		return res.States[0]
	}

	fixed := mk(accounting.FixedWindow, accounting.NoCalendar)
	charge(fixed, 12345)
	month := mk(accounting.FixedWindow, accounting.CalendarMonth)
	charge(month, 12345)
	bucket := mk(accounting.TokenBucket, accounting.NoCalendar)
	charge(bucket, 12345)
	sliding1 := mk(accounting.SlidingWindow, accounting.NoCalendar)
	charge(sliding1, 12345)
	// A sliding window charged in every one of its SlidingSlots+1 slots:
	// the most it ever holds.
	full := accounting.Limit{Name: "tenant-tpm-full", Scope: []string{"tenant", "user"}, Algorithm: accounting.SlidingWindow, Limit: 1_000_000, Window: time.Minute}
	slidingFull := full.Counter(attrs)
	for range accounting.SlidingSlots + 1 {
		charge(slidingFull, 12345)
		advance(s, accounting.Micros(accounting.SlotLength(&slidingFull)))
	}
	if v, _ := slidingValue(t, admin, slidingFull.Key); len(v.slots) != accounting.SlidingSlots+1 {
		t.Fatalf("sliding window: got %+v, want %d amounts", v, accounting.SlidingSlots+1)
	}
	// An ID as the Limiter makes them: 16 hex digits, a dash, a sequence.
	const id = "0123456789abcdef-1k4z"
	if _, err := s.Reserve(ctx, accounting.ReserveRequest{ID: id, Items: []accounting.ReserveItem{{Counter: fixed, Amount: 1}}}); err != nil {
		t.Fatal(err)
	}

	rows := []struct {
		name, key string
		max       int64
	}{
		{"fixed_window", fixed.Key, 192},
		{"fixed_window (month)", month.Key, 192},
		{"token_bucket", bucket.Key, 192},
		{"sliding_window, 1 slot", sliding1.Key, 192},
		{fmt.Sprintf("sliding_window, %d slots", accounting.SlidingSlots+1), slidingFull.Key, 480},
		{"reservation record", RecordKeyPrefix + id, 96},
	}
	var report strings.Builder
	fmt.Fprintf(&report, "%-26s %6s %9s  %s\n", "counter", "bytes", "encoding", "key (length)")
	for _, r := range rows {
		n, err := admin.MemoryUsage(ctx, r.key, 0).Result()
		if err != nil {
			t.Fatalf("MEMORY USAGE %s: %v", r.key, err)
		}
		enc, err := admin.ObjectEncoding(ctx, r.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&report, "%-26s %6d %9s  %q (%d)\n", r.name, n, enc, r.key, len(r.key))
		if n > r.max {
			t.Errorf("%s: %d bytes, want at most %d", r.name, n, r.max)
		}
		if enc != "embstr" && enc != "raw" {
			t.Errorf("%s: encoding %s, want a compact one", r.name, enc)
		}
	}
	t.Logf("MEMORY USAGE per key (Redis %s):\n%s", redisVersion(t, admin), report.String())
}

// redisVersion returns the server's redis_version.
func redisVersion(t *testing.T, admin *redis.Client) string {
	t.Helper()
	info, err := admin.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}
