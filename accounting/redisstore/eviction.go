package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// SafePolicy is the only maxmemory-policy under which Redis never deletes
// one of the Store's keys before it expires: when Redis is full, it
// refuses writes instead (OOM errors, which the Store reports as
// [accounting.ErrStoreUnavailable], so each limit's on_store_error
// decides).
const SafePolicy = "noeviction"

// ErrEvictionPolicy is returned, wrapped with each offending server and
// what it said, by [Store.CheckEviction] when a Redis server the Store
// writes to may evict the Store's keys: its maxmemory-policy is not
// noeviction, or it answered without saying which policy it has.
//
// An evicted counter is a budget forgotten: the next reservation finds no
// key, starts from zero, and an exhausted limit admits a full new budget.
// Every policy but noeviction can do that:
//
//   - allkeys-* (lru, lfu, random) evict any key, counters included.
//   - volatile-* (lru, lfu, random, ttl) evict only keys that have a TTL,
//     and every key the Store writes has one (a counter expires when its
//     state stops mattering), so these policies are no safer: where the
//     rest of the data in Redis has no TTL, tokenwarden's counters are the
//     only keys they can evict. volatile-ttl is the worst of them: it
//     evicts the keys nearest their expiry first, which are the fixed
//     windows nearest their end, those most likely to be exhausted.
//
// A maxmemory of 0 means no limit (on a 64-bit server): Redis never
// evicts, whatever the policy, and grows until the operating system stops
// it. The check still requires noeviction then, because the policy is the
// setting that says what Redis will do when it is full, and maxmemory can
// be set later without a restart (CONFIG SET, a managed service's
// parameter change) while tokenwarden keeps running on a start-up check
// it passed. With maxmemory 0, noeviction changes nothing, so asking for
// it costs nothing.
var ErrEvictionPolicy = errors.New("redisstore: Redis may evict the store's keys")

// ServerPolicy is what one Redis server the Store writes to says about
// eviction, in the memory section of INFO. INFO is used rather than
// CONFIG GET because managed services (ElastiCache, Memorystore, Azure
// Cache for Redis) allow it where they rename or disable CONFIG.
type ServerPolicy struct {
	// Server names the server: its address (host:port), or for a
	// Sentinel-monitored master its master name.
	Server string
	// Policy is maxmemory_policy, e.g. "noeviction" or "volatile-lru";
	// empty when the server did not say (see Unreadable).
	Policy string
	// MaxMemory is maxmemory in bytes; 0 means no limit.
	MaxMemory int64
	// Unreadable, when not nil, says why a server that answered did not
	// tell its policy: it refused INFO (an ACL user without +info, a proxy
	// that does not pass INFO on), or its INFO memory has no
	// maxmemory_policy.
	Unreadable error
}

// Evicts reports whether the server may evict the Store's keys: any
// policy but noeviction, or an unknown one.
func (p ServerPolicy) Evicts() bool { return p.Policy != SafePolicy }

// String describes the server's policy for error messages and logs.
func (p ServerPolicy) String() string {
	if p.Unreadable != nil {
		return fmt.Sprintf("%s does not tell its maxmemory-policy (%v)", p.Server, p.Unreadable)
	}
	limit := "maxmemory " + strconv.FormatInt(p.MaxMemory, 10) + " bytes"
	if p.MaxMemory == 0 {
		limit = "maxmemory 0: no limit yet"
	}
	return fmt.Sprintf("%s has maxmemory-policy %s (%s)", p.Server, p.Policy, limit)
}

// EvictionPolicies reads the eviction policy of every Redis server the
// Store writes to: the one server of a URL, the current master of a
// Sentinel group, every master of a Redis Cluster (and every shard of a
// go-redis Ring passed to [NewFromClient]). It sends one INFO memory to
// each, concurrently on a Cluster. Replicas are not read, but they need
// noeviction too: a failover makes one the master, and the next check
// reads it there.
//
// ctx bounds the whole call; the Store's Timeout does not, because the
// check is not on the request path and, at start-up, may have to dial
// every server first. Each answer is still bounded by the client's read
// timeout (the Store's Timeout for a Store built by [New]).
//
// Servers that answered are returned, sorted by name, even when others
// did not; for those the error wraps [accounting.ErrStoreUnavailable].
func (s *Store) EvictionPolicies(ctx context.Context) ([]ServerPolicy, error) {
	var (
		mu       sync.Mutex
		policies []ServerPolicy
		errs     []error
	)
	read := func(ctx context.Context, c redis.Cmdable, server string) error {
		p, err := readPolicy(ctx, c, server)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", server, err))
			return nil // read the others; the errors are collected
		}
		policies = append(policies, p)
		return nil
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return read(ctx, node, node.Options().Addr)
		})
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error {
			return read(ctx, shard, shard.Options().Addr)
		})
	case *redis.Client:
		server := c.Options().Addr
		if s.sentinelMaster != "" {
			server = fmt.Sprintf("Sentinel master %q", s.sentinelMaster)
		}
		err = read(ctx, c, server)
	default:
		err = read(ctx, c, "redis")
	}
	if err != nil {
		// A Cluster whose slot map could not be loaded reaches no master.
		errs = append(errs, err)
	}
	slices.SortFunc(policies, func(a, b ServerPolicy) int { return strings.Compare(a.Server, b.Server) })
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return policies, unavailable(errors.Join(errs...))
	}
	return policies, nil
}

// CheckEviction returns nil when every server the Store writes to has
// maxmemory-policy noeviction. Otherwise it returns [ErrEvictionPolicy],
// wrapped with each server that may evict and its policy, when any server
// that answered may evict (even if others did not answer: one evicting
// master is enough to forget budgets), or else the error of
// [Store.EvictionPolicies] (wrapping [accounting.ErrStoreUnavailable]).
func (s *Store) CheckEviction(ctx context.Context) error {
	policies, err := s.EvictionPolicies(ctx)
	var evicting []string
	for _, p := range policies {
		if p.Evicts() {
			evicting = append(evicting, p.String())
		}
	}
	if len(evicting) == 0 {
		return err
	}
	msg := strings.Join(evicting, "; ") + "; only " + SafePolicy + " is safe"
	if err != nil {
		msg += " (and " + err.Error() + ")"
	}
	return fmt.Errorf("%w: %s", ErrEvictionPolicy, msg)
}

// readPolicy sends INFO memory to one server. A refusal that says INFO
// will never work there (no permission, unknown command) is an answer: the
// policy is then unknown, not the server unreachable. Other error replies
// (LOADING, MASTERDOWN, …) pass, and are failures like a timeout.
func readPolicy(ctx context.Context, c redis.Cmdable, server string) (ServerPolicy, error) {
	p := ServerPolicy{Server: server}
	info, err := c.Info(ctx, "memory").Result()
	switch {
	case err == nil:
	case redis.IsPermissionError(err) || redis.HasErrorPrefix(err, "unknown command"):
		p.Unreadable = fmt.Errorf("INFO memory: %w", err)
		return p, nil
	default:
		return p, err
	}
	var ok bool
	p.Policy, p.MaxMemory, ok = parseMemoryInfo(info)
	if !ok {
		p.Unreadable = errors.New("INFO memory has no maxmemory_policy")
	}
	return p, nil
}

// parseMemoryInfo reads maxmemory_policy and maxmemory from the text of
// an INFO reply ("field:value" lines). ok is false when the reply has no
// usable maxmemory_policy. A missing or malformed maxmemory reads as 0:
// the policy alone decides.
func parseMemoryInfo(info string) (policy string, maxmemory int64, ok bool) {
	for line := range strings.Lines(info) {
		field, value, found := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if !found {
			continue
		}
		switch field {
		case "maxmemory_policy":
			policy = value
		case "maxmemory":
			if n, err := strconv.ParseInt(value, 10, 64); err == nil && n >= 0 {
				maxmemory = n
			}
		}
	}
	if !validPolicy(policy) {
		return "", maxmemory, false
	}
	return policy, maxmemory, true
}

// validPolicy accepts the shape of Redis's policy names (lower-case words
// joined by '-'), so that a garbled reply is not printed as a policy.
func validPolicy(p string) bool {
	if p == "" || len(p) > 64 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; !(c >= 'a' && c <= 'z' || c == '-') {
			return false
		}
	}
	return true
}
