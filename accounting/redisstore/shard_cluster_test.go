package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/storetest"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestShardedCluster runs the sharded layout (Options.ShardBy) on a Redis
// Cluster of three masters with a replica each, started once for all its
// subtests: the slot arithmetic against the cluster's own, the contract
// suites, the spread of tenants over the masters, the refund of an
// earlier step when a later one refuses, a live slot migration and a
// manual failover under load. The last two change the cluster, so they
// run last.
func TestShardedCluster(t *testing.T) {
	cl := redistest.StartReplicatedCluster(t, 3)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRetries: -1, ContextTimeoutEnabled: true})
	defer client.Close()
	ctx := context.Background()
	flush := func(t *testing.T) {
		t.Helper()
		err := client.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.FlushDB(ctx).Err()
		})
		if err != nil {
			t.Fatalf("FLUSHDB: %v", err)
		}
	}
	newSharded := func(t *testing.T) *Store {
		return newStore(t, nil, Options{ClusterAddrs: cl.Addrs(), ShardBy: "tenant"})
	}

	t.Run("key slots agree with CLUSTER KEYSLOT", func(t *testing.T) {
		s := &Store{shardBy: "tenant"}
		keys := []string{tenantCounter("daily", "acme", 10).Key, tenantCounter("daily", "{x}", 10).Key, fixedCounter("global", 1, time.Hour).Key}
		for _, k := range keys {
			keys = append(keys, s.RedisKey(k), groupRecordKey(keySlot(s.RedisKey(k)), "id-1"))
		}
		for _, c := range keySlotCases {
			keys = append(keys, c.key)
		}
		for _, k := range keys {
			want, err := client.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := keySlot(k); int64(got) != want {
				t.Errorf("keySlot(%q): got %d, want %d (CLUSTER KEYSLOT)", k, got, want)
			}
		}
	})

	// Six servers and the test share the machine, and a decision takes a
	// round trip per slot: Redis's clock runs further during a step of
	// the suite than on one server.
	shardedHarness := func(t *testing.T) storetest.Harness {
		flush(t)
		h := harness(t, newSharded(t))
		h.Tolerance = time.Second
		return h
	}
	t.Run("contract", func(t *testing.T) { storetest.Run(t, shardedHarness) })
	t.Run("inspect contract", func(t *testing.T) { storetest.RunInspect(t, shardedHarness) })

	t.Run("tenants spread over every master", func(t *testing.T) {
		flush(t)
		s := newSharded(t)
		const tenants = 300
		global := fixedCounter("spread-global", 1e9, time.Hour)
		for i := range tenants {
			tc := tenantCounter("spread-daily", fmt.Sprintf("tenant-%d", i), 1e9)
			res, err := s.Reserve(ctx, accounting.ReserveRequest{ID: fmt.Sprintf("spread-%d", i),
				Items: []accounting.ReserveItem{{Counter: tc, Amount: 1}, {Counter: global, Amount: 1}}})
			if err != nil || !res.Admitted {
				t.Fatalf("Reserve for tenant %d: got %+v, %v; want admitted", i, res, err)
			}
		}
		var mu sync.Mutex
		counts := map[string]int{}
		err := client.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			n := 0
			iter := c.Scan(ctx, 0, "{*}"+globEscape(accounting.CounterPrefix(&accounting.Limit{Name: "spread-daily", Algorithm: accounting.FixedWindow, Window: time.Hour}))+"*", 1000).Iterator()
			for iter.Next(ctx) {
				n++
			}
			mu.Lock()
			counts[c.Options().Addr] = n
			mu.Unlock()
			return iter.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, n := range counts {
			total += n
		}
		if total != tenants || len(counts) != 3 {
			t.Fatalf("tenant counters found: got %d on %d masters, want %d on 3", total, len(counts), tenants)
		}
		// Top finds them all, scanning every master.
		lim := accounting.Limit{Name: "spread-daily", Algorithm: accounting.FixedWindow, Window: time.Hour, Limit: 1e9, Scope: []string{"tenant"}}
		top, err := s.Top(ctx, accounting.TopRequest{Prefix: accounting.CounterPrefix(&lim), Counter: lim.Counter(nil), N: 5, MaxScan: 3000})
		if err != nil {
			t.Fatalf("Top: %v", err)
		}
		if top.Scanned != tenants || !top.Complete || len(top.Counters) != 5 || top.Counters[0].Used != 1 {
			t.Errorf("Top: got %d scanned, complete %v, %d counters (%+v); want %d, true, 5 of 1 used", top.Scanned, top.Complete, len(top.Counters), top.Counters, tenants)
		}
		for addr, n := range counts {
			share := float64(n) / tenants
			t.Logf("master %s: %d of %d tenants' counters (%.1f%%)", addr, n, tenants, 100*share)
			// A third each is what an even hash gives; the tenants are
			// fixed, so this is deterministic, not a statistical bet.
			if share < 0.25 {
				t.Errorf("master %s holds %.1f%% of the tenants, want about a third", addr, 100*share)
			}
		}
	})

	t.Run("a refusal in a later step refunds the earlier ones", func(t *testing.T) {
		flush(t)
		s := newSharded(t)
		global := fixedCounter("refund-global", 5, time.Hour)
		tc := tenantStepBefore(t, s, "refund-daily", global)
		mustAdmitAll(t, s, "fill", accounting.ReserveItem{Counter: global, Amount: 5})
		req := accounting.ReserveRequest{ID: "two-steps", Items: []accounting.ReserveItem{{Counter: tc, Amount: 3}, {Counter: global, Amount: 1}}}
		res, err := s.Reserve(ctx, req)
		if err != nil || res.Admitted {
			t.Fatalf("Reserve over the global limit: got %+v, %v; want refused", res, err)
		}
		if st := res.States[0]; !st.Fits || st.Remaining != 10 {
			t.Errorf("the tenant's step: got fits %v, remaining %d; want true, 10 (before the decision)", st.Fits, st.Remaining)
		}
		if st := res.States[1]; st.Fits || st.Remaining != 0 {
			t.Errorf("the global step: got fits %v, remaining %d; want false, 0", st.Fits, st.Remaining)
		}
		if u := peekUsed(t, s, tc); u != 0 {
			t.Errorf("tenant counter after the refusal: got %d used, want 0 (step 1 refunded)", u)
		}
		if vals := recordValues(t, s, req.ID); len(vals) != 0 {
			t.Errorf("records after the refusal: got %d, want 0", len(vals))
		}
		// The refund is a release: settling the refused reservation
		// finds nothing.
		if err := s.Settle(ctx, accounting.SettleRequest{ID: req.ID, Items: []accounting.SettleItem{{Counter: tc, Reserved: 3, Actual: 3, Mark: res.States[0].Mark}}}); err != accounting.ErrNoReservation {
			t.Errorf("Settle of the refused reservation: got %v, want ErrNoReservation", err)
		}
	})

	t.Run("a settlement retried after a partial one books each slot once", func(t *testing.T) {
		flush(t)
		s := newSharded(t)
		global := fixedCounter("partial-global", 100, time.Hour)
		tc := tenantStepBefore(t, s, "partial-daily", global)
		req := accounting.ReserveRequest{ID: "partial", Items: []accounting.ReserveItem{{Counter: tc, Amount: 10}, {Counter: global, Amount: 10}}}
		res := mustAdmitAll(t, s, req.ID, req.Items...)
		full := accounting.SettleRequest{ID: req.ID, Items: []accounting.SettleItem{
			{Counter: tc, Reserved: 10, Actual: 4, Mark: res.States[0].Mark},
			{Counter: global, Reserved: 10, Actual: 4, Mark: res.States[1].Mark},
		}}
		// The first attempt reached the tenant's slot only.
		if err := s.Settle(ctx, accounting.SettleRequest{ID: req.ID, Items: full.Items[:1]}); err != nil {
			t.Fatalf("partial Settle: %v", err)
		}
		if err := s.Settle(ctx, full); err != nil {
			t.Fatalf("retried Settle: got %v, want nil (the global slot applied)", err)
		}
		if err := s.Settle(ctx, full); err != accounting.ErrNoReservation {
			t.Errorf("Settle again: got %v, want ErrNoReservation", err)
		}
		for _, c := range []accounting.Counter{tc, global} {
			if u := peekUsed(t, s, c); u != 4 {
				t.Errorf("%s: got %d used, want 4", c.Key, u)
			}
		}
	})

	// The Limiter on the sharded layout: a tenant limit and a global one
	// (two slots, two steps), admitted and settled; then refused by the
	// global limit in the second step, naming it, the tenant's step
	// refunded.
	t.Run("the Limiter over two slots", func(t *testing.T) {
		flush(t)
		s := newSharded(t)
		tenant := accounting.Limit{Name: "lim-tenant", Scope: []string{"tenant"}, Dimension: accounting.Tokens, Algorithm: accounting.FixedWindow, Limit: 10_000, Window: time.Hour}
		global := accounting.Limit{Name: "lim-global", Dimension: accounting.Tokens, Algorithm: accounting.FixedWindow, Limit: 500, Window: time.Hour}
		attrs := accounting.Attributes{{Name: "tenant", Value: "acme"}}
		if gs := s.groups([]string{tenant.Counter(attrs).Key, global.Counter(nil).Key}); len(gs) != 2 {
			t.Fatalf("the two limits share a slot: %+v", gs)
		}
		l, err := accounting.New(accounting.Options{Store: s, Limits: []accounting.Limit{tenant, global}, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		est := accounting.Estimate{InputTokens: 200, OutputTokens: 100}
		r, err := l.Reserve(ctx, accounting.Request{Attributes: attrs, Estimate: est})
		if err != nil || !r.Admitted {
			t.Fatalf("first request: got admitted %v, %v; want admitted", r != nil && r.Admitted, err)
		}
		if settled, err := r.Settle(ctx, accounting.Usage{InputTokens: 200, OutputTokens: 50}); !settled || err != nil {
			t.Fatalf("Settle: got %v, %v", settled, err)
		}
		r, err = l.Reserve(ctx, accounting.Request{Attributes: attrs, Estimate: est})
		if err != nil || r.Admitted {
			t.Fatalf("second request, 300 over 250 left globally: got admitted %v, %v; want refused", r != nil && r.Admitted, err)
		}
		if r.Trip.Limit == nil || r.Trip.Limit.Name != "lim-global" || r.Trip.Remaining != 250 {
			t.Errorf("trip: got %+v, want lim-global with 250 remaining", r.Trip)
		}
		for _, c := range []struct {
			counter accounting.Counter
			want    int64
		}{{tenant.Counter(attrs), 250}, {global.Counter(nil), 250}} {
			if u := peekUsed(t, s, c.counter); u != c.want {
				t.Errorf("%s: got %d used, want %d (the settled usage, the refused request refunded)", c.counter.Key, u, c.want)
			}
		}
	})

	t.Run("a call whose connection breaks after it ran is not sent again", func(t *testing.T) {
		flush(t)
		opts := Options{ClusterAddrs: cl.Addrs(), ShardBy: "tenant", Timeout: testTimeout}
		u, err := clientOptions(&opts)
		if err != nil {
			t.Fatal(err)
		}
		cc := redis.NewClusterClient(u.Cluster())
		defer cc.Close()
		brk := &breakAfter{}
		cc.OnNewNode(func(c *redis.Client) { c.AddHook(brk) })
		s, err := NewFromClient(cc, opts)
		if err != nil {
			t.Fatal(err)
		}
		c := tenantCounter("broken", "acme", 100)
		mustAdmitAll(t, s, "warm", accounting.ReserveItem{Counter: c, Amount: 1})
		brk.armed.Store(true)
		req := accounting.ReserveRequest{ID: "broken", Items: []accounting.ReserveItem{{Counter: c, Amount: 10}}}
		// The Store undoes the step it cannot know about (its release
		// refunds the reservation's amounts once): had the client sent
		// it again, it would have charged twice, and 10 would stay.
		_, err = s.Reserve(ctx, req)
		if !errors.Is(err, accounting.ErrStoreUnavailable) || !errors.Is(err, accounting.ErrNotApplied) {
			t.Fatalf("Reserve whose connection broke: got %v, want a store error, undone (not applied)", err)
		}
		if u := peekUsed(t, s, c); u != 1 {
			t.Errorf("used after the broken reservation was undone: got %d, want 1 (charged once, refunded once)", u)
		}
	})

	// A step that times out: DEBUG SLEEP stalls the global counter's
	// master past the Store's timeout (1s), so step 2 fails without an
	// answer, and lands when the master wakes, while step 1, on another
	// master, is charged. Reserve
	// releases both; when the release of step 2 is answered within its
	// own timeout the decision changed nothing (ErrNotApplied), and when
	// it is not, the error stays ambiguous and the caller's release (the
	// Limiter's) finishes the job. Either way nothing stays charged.
	for _, tt := range []struct {
		name       string
		pause      time.Duration
		notApplied bool
	}{
		{"an ambiguous step is undone in the decision", 1500 * time.Millisecond, true},
		{"an undo that times out leaves the release to the caller", 3 * time.Second, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			flush(t)
			s, _ := loadStore(t, cl.Addrs())
			masters := masterClients(t, client)
			global := fixedCounter("stall-global", 1000, time.Hour)
			gMaster := ownerOf(t, keySlot(s.RedisKey(global.Key)), masters)
			var tc accounting.Counter
			for i := range 100 {
				tc = tenantCounter("stall-daily", fmt.Sprintf("acme-%d", i), 1000)
				if ownerOf(t, keySlot(s.RedisKey(tc.Key)), masters) != gMaster {
					break
				}
			}
			warm := mustAdmitAll(t, s, "warm", accounting.ReserveItem{Counter: tc, Amount: 1}, accounting.ReserveItem{Counter: global, Amount: 1})
			if err := s.Settle(ctx, accounting.SettleRequest{ID: "warm", Items: []accounting.SettleItem{
				{Counter: tc, Reserved: 1, Mark: warm.States[0].Mark}, {Counter: global, Reserved: 1, Mark: warm.States[1].Mark},
			}}); err != nil {
				t.Fatal(err)
			}

			asleep := stallServer(t, gMaster.Options().Addr, tt.pause)
			req := accounting.ReserveRequest{ID: "stalled", Items: []accounting.ReserveItem{{Counter: tc, Amount: 10}, {Counter: global, Amount: 10}}}
			_, err := s.Reserve(ctx, req)
			if !errors.Is(err, accounting.ErrStoreUnavailable) || errors.Is(err, accounting.ErrNotApplied) != tt.notApplied {
				t.Fatalf("Reserve with step 2 stalled: got %v; want a store error, not applied: %v", err, tt.notApplied)
			}
			if !tt.notApplied {
				// What the Limiter does with an ambiguous failure.
				deadline := time.Now().Add(time.Minute)
				for {
					_, err := s.Release(ctx, req)
					if err == nil {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("Release: %v", err)
					}
				}
			}
			// Once the stalled master has run what it received meanwhile
			// (the step its client gave up on included).
			<-asleep
			if err := gMaster.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for _, c := range []accounting.Counter{tc, global} {
				if u := peekUsed(t, s, c); u != 0 {
					t.Errorf("%s after the stalled decision: got %d used, want 0", c.Key, u)
				}
			}
			if records, _ := liveRecords(t, s); records != 0 {
				t.Errorf("records after the stalled decision: got %d, want 0", records)
			}
		})
	}

	t.Run("slot migration under load", func(t *testing.T) {
		flush(t)
		s, red := loadStore(t, cl.Addrs())
		lt := newLoadTest(t, s, 20)
		lt.start(6)
		lt.waitBusy(5)
		masters := masterClients(t, client)
		slot := keySlot(s.RedisKey(lt.busy.Key))
		src := ownerOf(t, slot, masters)
		dst := masters[0]
		if dst == src {
			dst = masters[1]
		}
		migrateSlot(t, lt, slot, src, dst, masters)
		lt.waitBusy(5)
		lt.finish()
		if got := ownerOf(t, slot, masters); got != dst {
			t.Errorf("slot %d after the migration: served by %s, want %s", slot, got.Options().Addr, dst.Options().Addr)
		}
		t.Logf("redirects followed: %d MOVED, %d ASK", red.moved.Load(), red.ask.Load())
		if red.moved.Load() == 0 || red.ask.Load() == 0 {
			t.Errorf("redirects: got %d MOVED, %d ASK; want some of each", red.moved.Load(), red.ask.Load())
		}
	})

	t.Run("manual failover under load", func(t *testing.T) {
		flush(t)
		s, red := loadStore(t, cl.Addrs())
		lt := newLoadTest(t, s, 20)
		lt.start(6)
		lt.waitBusy(5)
		masters := masterClients(t, client)
		m := ownerOf(t, keySlot(s.RedisKey(lt.busy.Key)), masters)
		replica := replicaOf(t, m)
		lt.waitBusy(50)
		failOver(t, replica, m)
		lt.waitBusy(200)
		lt.finish()
		t.Logf("failover of %s to %s; redirects followed: %d MOVED", m.Options().Addr, replica.Options().Addr, red.moved.Load())
		if red.moved.Load() == 0 {
			t.Errorf("redirects: got no MOVED, want the old master's")
		}
	})
}

// stallServer stalls the Redis at addr for d (DEBUG SLEEP, which blocks
// its event loop: what it receives meanwhile runs when it wakes, even
// from a client that has given up and closed its connection) and returns
// once it is asleep, with a channel closed when it wakes.
func stallServer(t *testing.T, addr string, d time.Duration) <-chan struct{} {
	t.Helper()
	sleeper := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: d + 10*time.Second})
	prober := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = sleeper.Close(); _ = prober.Close() })
	if err := prober.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	awake := make(chan struct{})
	go func() {
		defer close(awake)
		_ = sleeper.Do(context.Background(), "DEBUG", "SLEEP", d.Seconds()).Err()
	}()
	// The server has no way to say it is asleep but by not answering.
	for {
		select {
		case <-awake:
			t.Fatalf("DEBUG SLEEP on %s ended before a PING went unanswered", addr)
		default:
		}
		if err := prober.Ping(context.Background()).Err(); err != nil {
			return awake
		}
	}
}

// breakAfter, once armed, fails the next FCALL after Redis has run it, as
// a connection that breaks before the answer arrives does.
type breakAfter struct{ armed atomic.Bool }

func (b *breakAfter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (b *breakAfter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && cmd.Name() == "fcall" && b.armed.CompareAndSwap(true, false) {
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return err
	}
}

func (b *breakAfter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// tenantCounter is the counter of a fixed window limit scoped by tenant.
func tenantCounter(name, tenant string, limit int64) accounting.Counter {
	l := accounting.Limit{Name: name, Algorithm: accounting.FixedWindow, Limit: limit, Window: time.Hour, Scope: []string{"tenant"}}
	return l.Counter(accounting.Attributes{{Name: "tenant", Value: tenant}})
}

// tenantStepBefore returns a tenant's counter (limit 10) that s places in
// another slot than other, so that a reservation of both takes two steps,
// the tenant's first.
func tenantStepBefore(t *testing.T, s *Store, name string, other accounting.Counter) accounting.Counter {
	t.Helper()
	for i := range 100 {
		tc := tenantCounter(name, fmt.Sprintf("acme-%d", i), 10)
		if gs := s.groups([]string{tc.Key, other.Key}); len(gs) == 2 && gs[0].principal {
			return tc
		}
	}
	t.Fatal("no tenant found in another slot than the global counter")
	return accounting.Counter{}
}

func mustAdmitAll(t *testing.T, s *Store, id string, items ...accounting.ReserveItem) accounting.ReserveResult {
	t.Helper()
	res, err := s.Reserve(context.Background(), accounting.ReserveRequest{ID: id, Items: items})
	if err != nil || !res.Admitted {
		t.Fatalf("Reserve %s: got %+v, %v; want admitted", id, res, err)
	}
	return res
}

// peekUsed is what the counter has used, by the Store's own read.
func peekUsed(t testing.TB, s *Store, c accounting.Counter) int64 {
	t.Helper()
	got, err := s.Peek(context.Background(), []accounting.Counter{c})
	if err != nil {
		t.Fatalf("Peek %s: %v", c.Key, err)
	}
	return got[0].Used
}

// liveRecords counts the records (not the tombstones) the Store holds.
func liveRecords(t testing.TB, s *Store) (records, tombstones int) {
	t.Helper()
	for _, k := range shardedKeys(t, s, "*}"+globEscape(RecordKeyPrefix)+"*") {
		b, err := s.client.Get(context.Background(), k).Bytes()
		if err != nil {
			continue
		}
		if len(b) >= 8 && numf(string(b), 0) < 0 {
			// Minus the time of the release that left it.
			tombstones++
		} else {
			records++
		}
	}
	return records, tombstones
}
