package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/storetest"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestInspectContract runs the read side's contract suite on one server,
// with and without a hash tag.
func TestInspectContract(t *testing.T) {
	srv := redistest.Start(t)
	admin := adminClient(t, srv)
	for _, tag := range []string{"", "tw"} {
		t.Run("hash tag "+tag, func(t *testing.T) {
			storetest.RunInspect(t, func(t *testing.T) storetest.Harness {
				if err := admin.FlushDB(context.Background()).Err(); err != nil {
					t.Fatalf("FLUSHDB: %v", err)
				}
				return harness(t, newStore(t, srv, Options{HashTag: tag}))
			})
		})
	}
}

// TestInspectCluster runs it on a Redis Cluster, where Top scans the
// master of the hash tag's slot.
func TestInspectCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRetries: -1})
	defer client.Close()
	storetest.RunInspect(t, func(t *testing.T) storetest.Harness {
		err := client.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
			return c.FlushDB(ctx).Err()
		})
		if err != nil {
			t.Fatalf("FLUSHDB: %v", err)
		}
		return harness(t, newStore(t, nil, Options{ClusterAddrs: cl.Addrs(), HashTag: "tw"}))
	})
}

func TestGlobEscape(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "{tw}tw2:f60000:5:daily", "{tw}tw2:f60000:5:daily"},
		{"wildcards", `a*b?c[d]e\f`, `a\*b\?c\[d\]e\\f`},
	}
	for _, tt := range tests {
		if got := globEscape(tt.in); got != tt.want {
			t.Errorf("%s: globEscape(%q): got %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

// BenchmarkTop measures a top scan at the default bound: 10,000 counters
// of one limit among 10,000 keys of another, so that the scan examines
// (about) all 20,000 keys at MaxScan 20,000. It reports the time inside
// Redis (INFO commandstats) of the SCAN calls and of tw_peek's, per scan
// and per call: a call's is how long it holds every replica's
// reservations back.
func BenchmarkTop(b *testing.B) {
	srv := redistest.Start(b)
	s := newStore(b, srv, Options{Timeout: testTimeout})
	admin := adminClient(b, srv)
	ctx := context.Background()
	mine := accounting.Limit{Name: "per-user", Algorithm: accounting.SlidingWindow, Limit: 1 << 40, Window: time.Hour, Scope: []string{"user"}}
	other := accounting.Limit{Name: "other", Algorithm: accounting.FixedWindow, Limit: 1 << 40, Window: time.Hour, Scope: []string{"user"}}
	for i := range 10_000 {
		attrs := accounting.Attributes{{Name: "user", Value: strconv.Itoa(i)}}
		req := accounting.ReserveRequest{ID: "b" + strconv.Itoa(i), Items: []accounting.ReserveItem{
			{Counter: mine.Counter(attrs), Amount: int64(i + 1)}, {Counter: other.Counter(attrs), Amount: 1},
		}}
		if _, err := s.Reserve(ctx, req); err != nil {
			b.Fatal(err)
		}
		if err := s.Settle(ctx, accounting.SettleRequest{ID: req.ID}); err != nil {
			b.Fatal(err)
		}
	}
	req := accounting.TopRequest{Prefix: accounting.CounterPrefix(&mine), Counter: mine.Counter(nil), N: 10, MaxScan: 20_000}
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		res, err := s.Top(ctx, req)
		if err != nil || res.Scanned != 10_000 || res.Counters[0].Used != 10_000 {
			b.Fatalf("Top: scanned %d, %v", res.Scanned, err)
		}
	}
	stats, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	// cmdstat_scan:calls=…,usec=…,usec_per_call=…,…
	for line := range strings.SplitSeq(stats, "\r\n") {
		name, fields, _ := strings.Cut(line, ":")
		if name != "cmdstat_scan" && name != "cmdstat_fcall" {
			continue
		}
		var calls, usec float64
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseFloat(v, 64)
			case "usec":
				usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		what := strings.TrimPrefix(name, "cmdstat_")
		b.ReportMetric(usec/float64(b.N), what+"-µs/op")
		b.ReportMetric(usec/calls, what+"-µs/call")
	}
}
