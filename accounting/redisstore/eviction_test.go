package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

func TestParseMemoryInfo(t *testing.T) {
	tests := []struct {
		name      string
		info      string
		policy    string
		maxmemory int64
		ok        bool
	}{
		{"redis 7", "# Memory\r\nused_memory:914664\r\nmaxmemory:2097152\r\nmaxmemory_human:2.00M\r\nmaxmemory_policy:allkeys-lru\r\n", "allkeys-lru", 2097152, true},
		{"no limit", "# Memory\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n", "noeviction", 0, true},
		{"bare newlines, no trailing one", "maxmemory_policy:volatile-ttl\nmaxmemory:10", "volatile-ttl", 10, true},
		{"no policy", "# Memory\r\nused_memory:914664\r\nmaxmemory:0\r\n", "", 0, false},
		{"empty policy", "maxmemory_policy:\r\n", "", 0, false},
		{"garbled policy", "maxmemory_policy:no eviction\x00\r\n", "", 0, false},
		{"malformed maxmemory", "maxmemory:lots\r\nmaxmemory_policy:noeviction\r\n", "noeviction", 0, true},
		{"negative maxmemory", "maxmemory:-1\r\nmaxmemory_policy:noeviction\r\n", "noeviction", 0, true},
		{"similar field names", "maxmemory_policy_x:noeviction\r\nxmaxmemory_policy:noeviction\r\n", "", 0, false},
		{"empty", "", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy, maxmemory, ok := parseMemoryInfo(tt.info)
			if policy != tt.policy || maxmemory != tt.maxmemory || ok != tt.ok {
				t.Errorf("got %q, %d, %v; want %q, %d, %v", policy, maxmemory, ok, tt.policy, tt.maxmemory, tt.ok)
			}
		})
	}
}

// FuzzParseMemoryInfo feeds the INFO parser arbitrary replies: it never
// panics, reports a policy only when it says ok, and never a negative
// maxmemory.
func FuzzParseMemoryInfo(f *testing.F) {
	f.Add("# Memory\r\nused_memory:914664\r\nmaxmemory:2097152\r\nmaxmemory_policy:allkeys-lru\r\n")
	f.Add("maxmemory_policy:noeviction")
	f.Add("maxmemory:-5\nmaxmemory_policy:\n")
	f.Add(":\r\n::\r\nmaxmemory_policy::\r\n")
	f.Fuzz(func(t *testing.T, info string) {
		policy, maxmemory, ok := parseMemoryInfo(info)
		if ok != (policy != "") {
			t.Errorf("policy %q with ok %v", policy, ok)
		}
		if ok && !validPolicy(policy) {
			t.Errorf("policy %q is not a policy name", policy)
		}
		if maxmemory < 0 {
			t.Errorf("maxmemory %d", maxmemory)
		}
	})
}

// TestCheckEviction starts Redis with each kind of maxmemory-policy: only
// noeviction passes; every other policy, also with maxmemory 0 (no limit
// yet), is ErrEvictionPolicy naming the server and the policy.
func TestCheckEviction(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		policy    string
		maxmemory int64
	}{
		{"default", nil, "noeviction", 0},
		{"noeviction with a limit", []string{"--maxmemory", "10mb", "--maxmemory-policy", "noeviction"}, "noeviction", 10 << 20},
		{"allkeys-lru", []string{"--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru"}, "allkeys-lru", 10 << 20},
		{"volatile-lru", []string{"--maxmemory", "10mb", "--maxmemory-policy", "volatile-lru"}, "volatile-lru", 10 << 20},
		{"volatile-ttl", []string{"--maxmemory", "10mb", "--maxmemory-policy", "volatile-ttl"}, "volatile-ttl", 10 << 20},
		{"allkeys-random", []string{"--maxmemory", "10mb", "--maxmemory-policy", "allkeys-random"}, "allkeys-random", 10 << 20},
		// No limit today, but one CONFIG SET maxmemory away from evicting.
		{"allkeys-lru without maxmemory", []string{"--maxmemory-policy", "allkeys-lru"}, "allkeys-lru", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t, redistest.WithArgs(tt.args...))
			s := newStore(t, srv, Options{})
			ctx := context.Background()

			policies, err := s.EvictionPolicies(ctx)
			if err != nil {
				t.Fatalf("EvictionPolicies: %v", err)
			}
			want := ServerPolicy{Server: srv.Addr(), Policy: tt.policy, MaxMemory: tt.maxmemory}
			if len(policies) != 1 || policies[0] != want {
				t.Fatalf("EvictionPolicies: got %+v, want [%+v]", policies, want)
			}

			err = s.CheckEviction(ctx)
			if tt.policy == SafePolicy {
				if err != nil {
					t.Errorf("CheckEviction: got %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrEvictionPolicy) || errors.Is(err, accounting.ErrStoreUnavailable) {
				t.Fatalf("CheckEviction: got %v, want ErrEvictionPolicy (and not a store failure)", err)
			}
			for _, part := range []string{srv.Addr(), "maxmemory-policy " + tt.policy, "only noeviction is safe"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("CheckEviction: %q does not say %q", err, part)
				}
			}
		})
	}
}

// TestEvictionForgetsBudget shows the bypass the check exists for. A
// 1000-token budget is exhausted; then Redis fills up (with keys that have
// a TTL, as every tokenwarden counter does). Under an evicting policy
// Redis deletes the exhausted counter to make room, the store forgets it,
// and the next reservation is granted a whole new budget; CheckEviction
// refuses each of these servers. Under noeviction the same filling ends
// in OOM errors instead: the counter survives, the exhausted budget still
// refuses, and a write that needs memory fails as a store error, which
// the limits' on_store_error decides.
func TestEvictionForgetsBudget(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl", "noeviction"} {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "2mb", "--maxmemory-policy", policy))
			s := newStore(t, srv, Options{})
			admin := adminClient(t, srv)
			ctx := context.Background()

			budget := fixedCounter("eviction-"+policy, 1000, time.Hour)
			if res, err := reserveOne(ctx, s, budget, 1000); err != nil || !res.Admitted {
				t.Fatalf("first 1000 tokens: admitted %v, err %v", res.Admitted, err)
			}
			if res, err := reserveOne(ctx, s, budget, 1000); err != nil || res.Admitted {
				t.Fatalf("exhausted budget: admitted %v, err %v; want refused", res.Admitted, err)
			}

			evicted, writes, err := fillUntilEvicted(ctx, admin, budget.Key)
			t.Logf("%s: %d writes of 1 KB; counter evicted: %v; last write: %v", policy, writes, evicted, err)

			if policy == SafePolicy {
				if evicted || !redis.IsOOMError(err) {
					t.Fatalf("filling a noeviction Redis: evicted %v, last error %v; want the counter kept and an OOM error", evicted, err)
				}
				res, err := reserveOne(ctx, s, budget, 1000)
				if err == nil && res.Admitted {
					t.Errorf("exhausted budget on a full noeviction Redis: admitted; want refused (or a store error)")
				}
				// The failed write's own arguments were the last straw; new
				// counters fill what they freed, then fail.
				var newErr error
				for i := 0; i < 1000 && newErr == nil; i++ {
					_, newErr = reserveOne(ctx, s, fixedCounter(fmt.Sprintf("eviction-new-%d", i), 1000, time.Hour), 1)
				}
				if !errors.Is(newErr, accounting.ErrStoreUnavailable) || !redis.IsOOMError(newErr) {
					t.Errorf("new counters on a full noeviction Redis: got %v, want an OOM store error", newErr)
				}
				if n, err := admin.Exists(ctx, budget.Key).Result(); err != nil || n != 1 {
					t.Errorf("the exhausted counter after OOM: exists %d, err %v; want it kept", n, err)
				}
				if err := s.CheckEviction(ctx); err != nil {
					t.Errorf("CheckEviction: got %v, want nil", err)
				}
				return
			}

			if !evicted {
				t.Fatalf("filling a %s Redis: the counter was never evicted (%d writes, last error %v)", policy, writes, err)
			}
			res, err := reserveOne(ctx, s, budget, 1000)
			if err != nil || !res.Admitted {
				t.Fatalf("after eviction: admitted %v, err %v; the bypass did not happen", res.Admitted, err)
			}
			t.Logf("%s: the exhausted 1000-token budget admitted another 1000 tokens (remaining %d)", policy, res.States[0].Remaining)
			err = s.CheckEviction(ctx)
			if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), policy) {
				t.Errorf("CheckEviction: got %v, want ErrEvictionPolicy naming %s", err, policy)
			}
		})
	}
}

// fillUntilEvicted writes 1 KB values with a two-hour TTL (longer than the
// counter's, so volatile-ttl prefers the counter) until key is gone or a
// write fails, at most 50,000 times (25 times the 2 MB maxmemory).
func fillUntilEvicted(ctx context.Context, admin *redis.Client, key string) (evicted bool, writes int, err error) {
	value := strings.Repeat("x", 1024)
	for writes < 50_000 {
		if err := admin.Set(ctx, fmt.Sprintf("filler:%d", writes), value, 2*time.Hour).Err(); err != nil {
			return false, writes, err
		}
		writes++
		n, err := admin.Exists(ctx, key).Result()
		if err != nil {
			return false, writes, err
		}
		if n == 0 {
			return true, writes, nil
		}
	}
	return false, writes, nil
}

// TestCheckEvictionUnreadable covers servers that answer but will not
// tell their policy: an ACL user without INFO, and a Redis where INFO is
// renamed away (as some proxies do). Both are ErrEvictionPolicy (the
// Store cannot show its keys are safe), not an unreachable store.
func TestCheckEvictionUnreadable(t *testing.T) {
	ctx := context.Background()
	t.Run("no permission", func(t *testing.T) {
		srv := redistest.Start(t)
		if err := adminClient(t, srv).Do(ctx, "ACL", "SETUSER", "tw", "on", ">pw", "~*", "+@all", "-info").Err(); err != nil {
			t.Fatalf("ACL SETUSER: %v", err)
		}
		s := newStore(t, srv, Options{URL: "redis://tw:pw@" + srv.Addr() + "/0"})
		err := s.CheckEviction(ctx)
		if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "NOPERM") || !strings.Contains(err.Error(), srv.Addr()) {
			t.Errorf("CheckEviction: got %v, want ErrEvictionPolicy naming %s and NOPERM", err, srv.Addr())
		}
	})
	t.Run("unknown command", func(t *testing.T) {
		srv := redistest.Start(t, redistest.WithArgs("--rename-command", "info", ""))
		s := newStore(t, srv, Options{})
		policies, err := s.EvictionPolicies(ctx)
		if err != nil || len(policies) != 1 || policies[0].Unreadable == nil || policies[0].Policy != "" || !policies[0].Evicts() {
			t.Fatalf("EvictionPolicies: got %+v, %v; want one unreadable policy", policies, err)
		}
		if err := s.CheckEviction(ctx); !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "unknown command") {
			t.Errorf("CheckEviction: got %v, want ErrEvictionPolicy saying unknown command", err)
		}
	})
}

// TestCheckEvictionUnreachable: a Redis that does not answer is a store
// failure, not an eviction verdict, so that tokenwarden can start and let
// on_store_error decide.
func TestCheckEvictionUnreachable(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--maxmemory-policy", "allkeys-lru"))
	s := newStore(t, srv, Options{})
	srv.Kill()
	policies, err := s.EvictionPolicies(context.Background())
	if len(policies) != 0 || !errors.Is(err, accounting.ErrStoreUnavailable) {
		t.Errorf("EvictionPolicies: got %+v, %v; want no policies and ErrStoreUnavailable", policies, err)
	}
	err = s.CheckEviction(context.Background())
	if !errors.Is(err, accounting.ErrStoreUnavailable) || errors.Is(err, ErrEvictionPolicy) {
		t.Errorf("CheckEviction: got %v, want ErrStoreUnavailable only", err)
	}
}

// TestCheckEvictionSentinel reads the policy of the master that Sentinel
// names, and follows a change made while the Store runs.
func TestCheckEvictionSentinel(t *testing.T) {
	master := redistest.Start(t, redistest.WithArgs("--maxmemory-policy", "volatile-lru"))
	sentinel := redistest.StartSentinel(t, "tw-evict", master.Addr())
	s, err := New(Options{SentinelMasterName: "tw-evict", SentinelAddrs: []string{sentinel.Addr()}, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	err = s.CheckEviction(ctx)
	if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), `Sentinel master "tw-evict" has maxmemory-policy volatile-lru`) {
		t.Errorf("CheckEviction: got %v, want ErrEvictionPolicy naming the Sentinel master and volatile-lru", err)
	}
	if err := adminClient(t, master).ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckEviction(ctx); err != nil {
		t.Errorf("CheckEviction after CONFIG SET noeviction: %v", err)
	}
}

// TestCheckEvictionCluster reads every master of a Redis Cluster: one
// evicting master among three is found and named, also while another
// master is down; with every answering master safe, a master that is down
// makes the check a store failure.
func TestCheckEvictionCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	s := newStore(t, nil, Options{ClusterAddrs: cl.Addrs(), HashTag: "tw"})
	ctx := context.Background()
	configSet := func(srv *redistest.Server, policy string) {
		t.Helper()
		if err := adminClient(t, srv).ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatalf("CONFIG SET on %s: %v", srv.Addr(), err)
		}
	}

	policies, err := s.EvictionPolicies(ctx)
	if err != nil || len(policies) != 3 {
		t.Fatalf("EvictionPolicies: got %+v, %v; want three masters", policies, err)
	}
	for i, p := range policies {
		if p.Policy != SafePolicy || !strings.HasPrefix(p.Server, "127.0.0.1:") {
			t.Errorf("master %d: got %+v, want noeviction at a loopback address", i, p)
		}
	}
	if err := s.CheckEviction(ctx); err != nil {
		t.Fatalf("CheckEviction on a noeviction cluster: %v", err)
	}

	// The master that does not hold the hash tag's slot matters as much:
	// a failover or resharding can move the slot to it.
	bad, down := cl.Servers[2], cl.Servers[0]
	configSet(bad, "allkeys-lfu")
	err = s.CheckEviction(ctx)
	if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), bad.Addr()+" has maxmemory-policy allkeys-lfu") {
		t.Fatalf("CheckEviction with one allkeys-lfu master: got %v, want ErrEvictionPolicy naming %s", err, bad.Addr())
	}
	for _, other := range cl.Servers[:2] {
		if strings.Contains(err.Error(), other.Addr()) {
			t.Errorf("CheckEviction names %s, which has noeviction: %v", other.Addr(), err)
		}
	}

	down.Kill()
	err = s.CheckEviction(ctx)
	if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), bad.Addr()) || !strings.Contains(err.Error(), down.Addr()) {
		t.Errorf("CheckEviction with a master down: got %v, want ErrEvictionPolicy naming %s (and the failure of %s)", err, bad.Addr(), down.Addr())
	}
	configSet(bad, "noeviction")
	err = s.CheckEviction(ctx)
	if !errors.Is(err, accounting.ErrStoreUnavailable) || errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), down.Addr()) {
		t.Errorf("CheckEviction with the others safe and a master down: got %v, want ErrStoreUnavailable naming %s", err, down.Addr())
	}
}
