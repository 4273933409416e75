package redisstore

import (
	"context"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting/storetest"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestHoldContract runs the holds' contract suite on one server, with and
// without a hash tag, and on the sharded layout, where a hold's record is
// written in every slot its counters fall in.
func TestHoldContract(t *testing.T) {
	srv := redistest.Start(t)
	admin := adminClient(t, srv)
	for _, opts := range []struct {
		name string
		o    Options
	}{{"plain", Options{}}, {"hash tag", Options{HashTag: "tw"}}, {"sharded", Options{ShardBy: "tenant"}}} {
		t.Run(opts.name, func(t *testing.T) {
			storetest.RunHolds(t, func(t *testing.T) storetest.Harness {
				if err := admin.FlushDB(context.Background()).Err(); err != nil {
					t.Fatalf("FLUSHDB: %v", err)
				}
				return harness(t, newStore(t, srv, opts.o))
			})
		})
	}
}
