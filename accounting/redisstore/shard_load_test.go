package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// loadTest drives reservations and settlements on a sharded Store from
// several goroutines, as the Limiter would (an ambiguous Reserve is
// released, a failed Settle is retried until it answers), and keeps the
// ledger of what was settled on every counter.
type loadTest struct {
	t       *testing.T
	s       *Store
	busy    accounting.Counter   // the tenant a migration or failover hits
	tenants []accounting.Counter // the others
	global  accounting.Counter

	mu      sync.Mutex
	settled map[string]int64 // counter key: the sum of settled amounts
	errs    []string

	// busyDone gets a value (when nobody is waiting, it is dropped) each
	// time a reservation on the busy tenant is answered, success or
	// failure, so that a test can let some happen in each phase without
	// a clock.
	busyDone  chan struct{}
	decisions atomic.Int64
	storeErrs atomic.Int64
	stop      chan struct{}
	wg        sync.WaitGroup
	// background runs the releases and the retried settlements, as the
	// Limiter runs them: off the request's path, so that a worker goes on
	// while a migration holds a slot.
	background sync.WaitGroup
}

func newLoadTest(t *testing.T, s *Store, tenants int) *loadTest {
	lt := &loadTest{t: t, s: s, settled: map[string]int64{}, busyDone: make(chan struct{}), stop: make(chan struct{})}
	lt.busy = tenantCounter("ledger-daily", "busy", 1e12)
	for i := range tenants {
		lt.tenants = append(lt.tenants, tenantCounter("ledger-daily", fmt.Sprintf("t%d", i), 1e12))
	}
	lt.global = fixedCounter("ledger-global", 1e12, time.Hour)
	return lt
}

// start runs workers goroutines: half of them on the busy tenant alone.
func (lt *loadTest) start(workers int) {
	for w := range workers {
		lt.wg.Add(1)
		go func() {
			defer lt.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for n := 0; ; n++ {
				select {
				case <-lt.stop:
					return
				default:
				}
				tc := lt.busy
				if w%2 == 1 {
					tc = lt.tenants[rng.IntN(len(lt.tenants))]
				}
				lt.decide(fmt.Sprintf("load-%d-%d", w, n), tc, rng)
			}
		}()
	}
}

// waitBusy returns once n more reservations on the busy tenant have
// been answered.
func (lt *loadTest) waitBusy(n int) {
	for range n {
		<-lt.busyDone
	}
}

// finish stops the workers and checks the ledger: every counter holds
// the sum of what was settled on it, and no record is left.
func (lt *loadTest) finish() {
	t := lt.t
	close(lt.stop)
	lt.wg.Wait()
	lt.background.Wait()
	for _, e := range lt.errs {
		t.Error(e)
	}
	counters := append([]accounting.Counter{lt.busy, lt.global}, lt.tenants...)
	for _, c := range counters {
		if got, want := peekUsed(t, lt.s, c), lt.settled[c.Key]; got != want {
			t.Errorf("counter %s: got %d used, want %d (the sum settled)", c.Key, got, want)
		}
	}
	records, tombstones := liveRecords(t, lt.s)
	if records != 0 {
		t.Errorf("records left: got %d, want 0", records)
	}
	t.Logf("%d decisions, %d store errors (each retried or released), %d tombstones of releases", lt.decisions.Load(), lt.storeErrs.Load(), tombstones)
}

// decide reserves 10 on tc and the global counter and settles a random
// amount, as the Limiter does it.
func (lt *loadTest) decide(id string, tc accounting.Counter, rng *rand.Rand) {
	ctx := context.Background()
	lt.decisions.Add(1)
	req := accounting.ReserveRequest{ID: id, Items: []accounting.ReserveItem{{Counter: tc, Amount: 10}, {Counter: lt.global, Amount: 10}}}
	res, err := lt.s.Reserve(ctx, req)
	if tc.Key == lt.busy.Key {
		// Before any release or settlement: those wait for a
		// migration to end, which waits for this.
		select {
		case lt.busyDone <- struct{}{}:
		default:
		}
	}
	switch {
	case err != nil && !errors.Is(err, accounting.ErrStoreUnavailable):
		lt.fail("Reserve %s: %v", id, err)
		return
	case err != nil:
		lt.storeErrs.Add(1)
		if !errors.Is(err, accounting.ErrNotApplied) {
			lt.later(func() {
				lt.retry("Release "+id, func() error {
					_, err := lt.s.Release(ctx, req)
					return err
				})
			})
		}
		return
	case !res.Admitted:
		lt.fail("Reserve %s: refused (%+v), want admitted", id, res.States)
		return
	}
	actual := 1 + rng.Int64N(20)
	sr := accounting.SettleRequest{ID: id, Items: []accounting.SettleItem{
		{Counter: tc, Reserved: 10, Actual: actual, Mark: res.States[0].Mark},
		{Counter: lt.global, Reserved: 10, Actual: actual, Mark: res.States[1].Mark},
	}}
	settled := func() {
		lt.mu.Lock()
		lt.settled[tc.Key] += actual
		lt.settled[lt.global.Key] += actual
		lt.mu.Unlock()
	}
	err = lt.s.Settle(ctx, sr)
	switch {
	case err == nil:
		settled()
		return
	case !errors.Is(err, accounting.ErrStoreUnavailable):
		lt.fail("Settle %s: %v", id, err)
		return
	}
	lt.storeErrs.Add(1)
	lt.later(func() {
		ok := lt.retry("Settle "+id, func() error {
			err := lt.s.Settle(ctx, sr)
			if errors.Is(err, accounting.ErrNoReservation) {
				// An earlier attempt landed, its answer lost.
				err = nil
			}
			return err
		})
		if ok {
			settled()
		}
	})
}

// later runs fn in the background; finish waits for it.
func (lt *loadTest) later(fn func()) {
	lt.background.Add(1)
	go func() {
		defer lt.background.Done()
		fn()
	}()
}

// retry calls fn until it succeeds, for two minutes at most, counting
// store errors, and reports whether it succeeded.
func (lt *loadTest) retry(what string, fn func() error) bool {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := fn()
		if err == nil {
			return true
		}
		if !errors.Is(err, accounting.ErrStoreUnavailable) || time.Now().After(deadline) {
			lt.fail("%s: %v", what, err)
			return false
		}
		lt.storeErrs.Add(1)
		// Pacing between attempts at a store that is failing over, not
		// synchronisation: the outcome does not depend on it.
		time.Sleep(5 * time.Millisecond)
	}
}

func (lt *loadTest) fail(format string, args ...any) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.errs = append(lt.errs, fmt.Sprintf(format, args...))
}

// redirects counts the MOVED and ASK answers a cluster client's nodes
// get.
type redirects struct{ moved, ask atomic.Int64 }

func (r *redirects) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *redirects) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.count(err)
		return err
	}
}

func (r *redirects) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			r.count(c.Err())
		}
		return err
	}
}

func (r *redirects) count(err error) {
	switch {
	case err == nil:
	case strings.HasPrefix(err.Error(), "MOVED "):
		r.moved.Add(1)
	case strings.HasPrefix(err.Error(), "ASK "):
		r.ask.Add(1)
	}
}

// loadStore returns a sharded Store on the cluster at addrs, on a client
// built as New builds it, whose redirects are counted, its clock frozen
// mid-hour so that no window ends during the test.
func loadStore(t *testing.T, addrs []string) (*Store, *redirects) {
	t.Helper()
	opts := Options{ClusterAddrs: addrs, ShardBy: "tenant", Timeout: time.Second}
	u, err := clientOptions(&opts)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClusterClient(u.Cluster())
	r := &redirects{}
	client.OnNewNode(func(c *redis.Client) { c.AddHook(r) })
	t.Cleanup(func() { _ = client.Close() })
	s, err := NewFromClient(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.frozen.Store(time.Now().Truncate(time.Hour).Add(30 * time.Minute).UnixMicro())
	return s, r
}

// nodeID is a cluster node's ID.
func nodeID(t *testing.T, c *redis.Client) string {
	t.Helper()
	id, err := c.Do(context.Background(), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatalf("CLUSTER MYID on %s: %v", c.Options().Addr, err)
	}
	return id
}

// migrateSlot moves slot from src to dst as redis-cli --cluster reshard
// does (IMPORTING, MIGRATING, MIGRATE of its keys, then NODE on every
// master), letting lt make busy decisions between the steps, so that some
// meet the slot half moved (ASK, TRYAGAIN) and some the old owner after
// it (MOVED).
func migrateSlot(t *testing.T, lt *loadTest, slot int, src, dst *redis.Client, masters []*redis.Client) {
	t.Helper()
	ctx := context.Background()
	srcID, dstID := nodeID(t, src), nodeID(t, dst)
	must := func(c *redis.Client, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, c.Options().Addr, err)
		}
	}
	must(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	must(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	lt.waitBusy(3)
	host, port, err := net.SplitHostPort(dst.Options().Addr)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 10).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(src, args...)
		moved += len(keys)
		// Decisions on the slot, its counter now on dst.
		lt.waitBusy(2)
	}
	if moved == 0 {
		t.Fatalf("slot %d held no key to migrate", slot)
	}
	must(dst, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	must(src, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	for _, m := range masters {
		if m != src && m != dst {
			must(m, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
		}
	}
	t.Logf("slot %d: %d keys migrated from %s to %s", slot, moved, src.Options().Addr, dst.Options().Addr)
}

// masterClients returns a client on every master of the cluster, closed
// when t ends.
func masterClients(t *testing.T, client *redis.ClusterClient) []*redis.Client {
	t.Helper()
	var mu sync.Mutex
	var addrs []string
	err := client.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		addrs = append(addrs, c.Options().Addr)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*redis.Client
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		out = append(out, c)
	}
	return out
}

// ownerOf returns the master among masters that serves slot.
func ownerOf(t *testing.T, slot int, masters []*redis.Client) *redis.Client {
	t.Helper()
	for _, m := range masters {
		slots, err := m.ClusterSlots(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		id := nodeID(t, m)
		for _, r := range slots {
			if slot >= int(r.Start) && slot <= int(r.End) && len(r.Nodes) > 0 && r.Nodes[0].ID == id {
				return m
			}
		}
	}
	t.Fatalf("no master serves slot %d", slot)
	return nil
}

// replicaOf returns a client on a replica of master m, closed when t
// ends.
func replicaOf(t *testing.T, m *redis.Client) *redis.Client {
	t.Helper()
	lines, err := m.Do(context.Background(), "CLUSTER", "REPLICAS", nodeID(t, m)).StringSlice()
	if err != nil || len(lines) == 0 {
		t.Fatalf("CLUSTER REPLICAS of %s: %v %v", m.Options().Addr, lines, err)
	}
	// "<id> <ip:port@cport> …"
	f := strings.Fields(lines[0])
	addr, _, _ := strings.Cut(f[1], "@")
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// failOver runs CLUSTER FAILOVER on replica and returns once the replica
// says it is a master and its old master says it is a replica.
func failOver(t *testing.T, replica, master *redis.Client) {
	t.Helper()
	ctx := context.Background()
	if err := replica.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %s: %v", replica.Options().Addr, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, _ := replica.Info(ctx, "replication").Result()
		b, _ := master.Info(ctx, "replication").Result()
		if strings.Contains(a, "role:master") && strings.Contains(b, "role:slave") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("failover of %s to %s not done within 30s", master.Options().Addr, replica.Options().Addr)
		}
		// Polling another process's state: it has no channel to wait on.
		time.Sleep(10 * time.Millisecond)
	}
}
