package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestLateArrivals delivers calls to Redis after their client gave up on
// them, before or after what the test sends meanwhile on another
// connection: a reservation that lands after its timeout is found and
// refunded by its release; one that lands after its release charges
// nothing; a settlement that lands after its own retry changes nothing.
func TestLateArrivals(t *testing.T) {
	srv := redistest.Start(t)
	admin := adminClient(t, srv)
	ctx := context.Background()
	c := fixedCounter("late", 1000, time.Hour)
	other := (&accounting.Limit{Name: "late-sliding", Algorithm: accounting.SlidingWindow, Limit: 1000, Window: time.Hour}).Counter(nil)

	setup := func(t *testing.T) (slow *holdingProxy, viaProxy, direct *Store) {
		if err := admin.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		slow = startProxy(t, srv.Addr())
		viaProxy = newStore(t, srv, Options{URL: slow.URL(), Timeout: faultTimeout})
		direct = newStore(t, srv, Options{})
		// Connect and load the library before anything is held.
		if err := viaProxy.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := direct.Release(ctx, accounting.ReserveRequest{ID: "warm-up"}); err != nil {
			t.Fatal(err)
		}
		return slow, viaProxy, direct
	}
	req := accounting.ReserveRequest{ID: "late-1", Items: []accounting.ReserveItem{{Counter: c, Amount: 600}, {Counter: other, Amount: 600}}}
	timedOut := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, accounting.ErrStoreUnavailable) || errors.Is(err, accounting.ErrNotApplied) {
			t.Fatalf("a call held past its timeout: got %v, want ErrStoreUnavailable, not ErrNotApplied", err)
		}
	}

	t.Run("reservation lands, then its release", func(t *testing.T) {
		slow, viaProxy, direct := setup(t)
		slow.hold()
		_, err := viaProxy.Reserve(ctx, req)
		timedOut(t, err)
		slow.deliver()
		if used := fixedUsed(t, admin, c.Key); used != 600 {
			t.Fatalf("used once the reservation landed: got %d, want 600", used)
		}
		released, err := direct.Release(ctx, req)
		if err != nil || !released {
			t.Fatalf("Release: got %v, %v; want true", released, err)
		}
		if used := fixedUsed(t, admin, c.Key); used != 0 {
			t.Errorf("fixed window used after the release: got %d, want 0", used)
		}
		if used := slidingUsed(t, admin, other.Key); used != 0 {
			t.Errorf("sliding window used after the release: got %d, want 0", used)
		}
		if n := admin.Exists(ctx, RecordKeyPrefix+req.ID).Val(); n != 0 {
			t.Errorf("record after the release: still there")
		}
	})

	t.Run("release, then the reservation lands", func(t *testing.T) {
		slow, viaProxy, direct := setup(t)
		slow.hold()
		_, err := viaProxy.Reserve(ctx, req)
		timedOut(t, err)
		released, err := direct.Release(ctx, req)
		if err != nil || released {
			t.Fatalf("Release: got %v, %v; want false (nothing applied yet)", released, err)
		}
		slow.deliver()
		if used := fixedUsed(t, admin, c.Key); used != 0 {
			t.Errorf("used after the reservation landed behind its release: got %d, want 0", used)
		}
		if used := slidingUsed(t, admin, other.Key); used != 0 {
			t.Errorf("sliding window used: got %d, want 0", used)
		}
		ttl := admin.PTTL(ctx, RecordKeyPrefix+req.ID).Val()
		if want := accounting.RecordTTL + accounting.RecordGrain; ttl <= want-time.Minute || ttl > want {
			t.Errorf("tombstone TTL: got %v, want about %v", ttl, want)
		}
	})

	t.Run("settlement lands after its retry", func(t *testing.T) {
		slow, viaProxy, direct := setup(t)
		res, err := direct.Reserve(ctx, req)
		if err != nil || !res.Admitted {
			t.Fatalf("Reserve: admitted %v, err %v", res.Admitted, err)
		}
		sr := accounting.SettleRequest{ID: req.ID, Items: []accounting.SettleItem{
			{Counter: c, Reserved: 600, Actual: 900, Mark: res.States[0].Mark},
			{Counter: other, Reserved: 600, Actual: 100, Mark: res.States[1].Mark},
		}}
		slow.hold()
		timedOut(t, viaProxy.Settle(ctx, sr))
		if err := direct.Settle(ctx, sr); err != nil {
			t.Fatalf("the retry: %v", err)
		}
		slow.deliver()
		if used := fixedUsed(t, admin, c.Key); used != 900 {
			t.Errorf("fixed window used: got %d, want 900 (settled once)", used)
		}
		if used := slidingUsed(t, admin, other.Key); used != 100 {
			t.Errorf("sliding window used: got %d, want 100 (settled once)", used)
		}
	})
}
