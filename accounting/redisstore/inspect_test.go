package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

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
