package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/storetest"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestCluster runs the Store on a three-master Redis Cluster: without a
// hash tag a request whose counters live in different slots is refused
// (CROSSSLOT, a store error); with Options.HashTag the whole contract
// suite passes.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	if _, err := New(Options{ClusterAddrs: cl.Addrs()}); err == nil || !strings.Contains(err.Error(), "hash_tag: required") {
		t.Errorf("New for a cluster without a hash tag: got %v, want an error", err)
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRetries: -1, ContextTimeoutEnabled: true})
	defer client.Close()
	ctx := context.Background()

	t.Run("without hash tag", func(t *testing.T) {
		s, err := NewFromClient(client, Options{Timeout: testTimeout})
		if err != nil {
			t.Fatal(err)
		}
		a, b := fixedCounter("cluster-a", 10, 3600e9), fixedCounter("cluster-b", 10, 3600e9)
		sa, _ := client.ClusterKeySlot(ctx, a.Key).Result()
		sb, _ := client.ClusterKeySlot(ctx, b.Key).Result()
		if sa == sb {
			t.Skipf("keys %q and %q share slot %d", a.Key, b.Key, sa)
		}
		_, err = s.Reserve(ctx, accounting.ReserveRequest{ID: "c", Items: []accounting.ReserveItem{{Counter: a, Amount: 1}, {Counter: b, Amount: 1}}})
		if !errors.Is(err, accounting.ErrStoreUnavailable) || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Errorf("Reserve across slots: got %v, want a CROSSSLOT store error", err)
		}
	})

	t.Run("hash tag", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Harness {
			err := client.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
				return c.FlushDB(ctx).Err()
			})
			if err != nil {
				t.Fatalf("FLUSHDB: %v", err)
			}
			return harness(t, newStore(t, nil, Options{ClusterAddrs: cl.Addrs(), HashTag: "tw"}))
		})
	})
}
