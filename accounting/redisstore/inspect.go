package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
)

var _ accounting.Inspector = (*Store)(nil)

// The read side's steps: SCAN asks for at most scanStep keys a call (a
// hint Redis follows closely), and Top reads the counters it found in
// FCALLs of tw_peek of at most peekBatch keys, so that no one call holds
// Redis, and every replica's reservations behind it, for long: about
// 0.3 ms each (BenchmarkTop). Larger steps save round trips, not Redis
// time.
const (
	scanStep  = 500
	peekBatch = 100
)

// Peek implements [accounting.Inspector] with one call of tw_peek, which
// reads the counters as tw_reserve would for an amount of nothing and
// writes nothing (it is flagged no-writes, so it runs on a Redis out of
// memory, too).
func (s *Store) Peek(ctx context.Context, counters []accounting.Counter) ([]accounting.CounterUsage, error) {
	if s.shardBy != "" {
		return s.peekSharded(ctx, counters)
	}
	out := make([]accounting.CounterUsage, 0, len(counters))
	for len(counters) > 0 {
		n := min(len(counters), peekBatch)
		got, err := s.peek(ctx, counters[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		counters = counters[n:]
	}
	return out, nil
}

// peek is one call of tw_peek.
func (s *Store) peek(ctx context.Context, counters []accounting.Counter) ([]accounting.CounterUsage, error) {
	keys, args, err := s.peekArgs(counters)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	reply, err := s.fcall(ctx, &lib.peek, keys, args...).Text()
	if err != nil {
		return nil, unavailable(err)
	}
	return peekUsage(counters, reply)
}

// peekArgs returns the keys and arguments of tw_peek for counters.
func (s *Store) peekArgs(counters []accounting.Counter) ([]string, []any, error) {
	n := len(counters)
	keys := make([]string, n)
	items := make([]byte, 0, 8*counterNums*n)
	z := zones{s: s}
	var err error
	for i := range counters {
		keys[i] = s.RedisKey(counters[i].Key)
		if items, err = appendCounter(items, &counters[i], &z); err != nil {
			return nil, nil, err
		}
	}
	if z.n == 0 {
		return keys, []any{s.clock(), items}, nil
	}
	return keys, []any{s.clock(), items, z.b}, nil
}

// peekUsage reads tw_peek's answer for counters.
func peekUsage(counters []accounting.Counter, reply string) ([]accounting.CounterUsage, error) {
	n := len(counters)
	if len(reply) != 8*2*n {
		return nil, unavailable(fmt.Errorf("tw_peek answered %d bytes for %d counters", len(reply), n))
	}
	out := make([]accounting.CounterUsage, n)
	for i := range out {
		out[i] = accounting.NewCounterUsage(&counters[i], num(reply, 2*i), accounting.Micros(num(reply, 2*i+1)))
	}
	return out, nil
}

// ResetCounter implements [accounting.Inspector] with one call of
// tw_reset, which writes the counter afresh with its new epoch (a
// counter of leases it deletes).
func (s *Store) ResetCounter(ctx context.Context, c accounting.Counter) (bool, error) {
	keys, args, err := s.peekArgs([]accounting.Counter{c})
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := s.fcall(ctx, &lib.reset, keys, args...).Int64()
	if err != nil {
		return false, unavailable(err)
	}
	return n == 1, nil
}

// Top implements [accounting.Inspector]: SCAN with MATCH on the limit's
// prefix, in steps whose COUNT hints add up to req.MaxScan (SCAN walks
// the whole keyspace, the limit's keys and everyone else's, so the bound
// is on the keys Redis examines, not on those that match), then tw_peek
// on the keys found. Each call has the Store's timeout. On a Redis
// Cluster with a hash tag the keys all sit on the master of its slot,
// which is the one scanned; on the sharded layout (Options.ShardBy) every
// master is scanned, each with an equal share of req.MaxScan. A cluster
// with neither is refused.
func (s *Store) Top(ctx context.Context, req accounting.TopRequest) (accounting.TopResult, error) {
	scanners, err := s.scanners(ctx)
	if err != nil {
		return accounting.TopResult{}, err
	}
	match := globEscape(s.prefix+req.Prefix) + "*"
	tagLen := len(s.prefix)
	if s.shardBy != "" {
		// Any tag: "{" and eight characters and "}", then the prefix.
		match = "{" + strings.Repeat("?", shardTagLen) + "}" + match
		tagLen = shardTagLen + 2
	}
	sc := topScan{match: match, tagLen: tagLen, max: req.MaxScan, seen: make(map[string]bool), complete: true}
	share := req.MaxScan / len(scanners)
	if share == 0 && req.MaxScan > 0 {
		share = 1
	}
	for _, scanner := range scanners {
		if err := sc.scan(ctx, s, scanner, share); err != nil {
			return accounting.TopResult{}, err
		}
	}
	res := accounting.TopResult{Scanned: len(sc.counters), Complete: sc.complete}
	counters := make([]accounting.Counter, len(sc.counters))
	for i, k := range sc.counters {
		counters[i] = req.Counter
		counters[i].Key = k
	}
	states, err := s.Peek(ctx, counters)
	if err != nil {
		return accounting.TopResult{}, err
	}
	for i, u := range states {
		if u.Used > 0 {
			res.Counters = append(res.Counters, accounting.TopCounter{Key: counters[i].Key, CounterUsage: u})
		}
	}
	accounting.SortTop(res.Counters)
	if len(res.Counters) > req.N {
		res.Counters = res.Counters[:max(req.N, 0)]
	}
	return res, nil
}

// topScan collects the counter keys Top finds.
type topScan struct {
	match string
	// tagLen is how much of a Redis key goes before the counter key.
	tagLen   int
	max      int
	seen     map[string]bool
	counters []string
	// complete: every scan so far reached its end, nothing left out.
	complete bool
}

// scan SCANs one server for the limit's keys, examining about budget
// keys at most.
func (sc *topScan) scan(ctx context.Context, s *Store, scanner redis.Cmdable, budget int) error {
	var cursor uint64
	for budget > 0 {
		count := min(budget, scanStep)
		budget -= count
		sctx, cancel := context.WithTimeout(ctx, s.timeout)
		page, next, err := scanner.Scan(sctx, cursor, sc.match, int64(count)).Result()
		cancel()
		if err != nil {
			return unavailable(err)
		}
		for _, k := range page {
			if sc.seen[k] || len(k) < sc.tagLen {
				// SCAN may return a key twice (the table was resized).
				continue
			}
			if len(sc.counters) == sc.max {
				sc.complete = false
				return nil
			}
			sc.seen[k] = true
			sc.counters = append(sc.counters, k[sc.tagLen:])
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
	sc.complete = false
	return nil
}

// scanners returns the clients to SCAN: the Store's own; on a Redis
// Cluster with a hash tag, the master holding its slot; on the sharded
// layout, every master.
func (s *Store) scanners(ctx context.Context) ([]redis.Cmdable, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return []redis.Cmdable{s.client}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if s.shardBy != "" {
		var mu sync.Mutex
		var masters []redis.Cmdable
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			masters = append(masters, c)
			return nil
		})
		if err != nil {
			return nil, unavailable(err)
		}
		return masters, nil
	}
	if s.prefix == "" {
		return nil, errors.New("redisstore: listing counters on a Redis Cluster needs a hash tag or shard_by")
	}
	node, err := cc.MasterForKey(ctx, s.prefix)
	if err != nil {
		return nil, unavailable(err)
	}
	return []redis.Cmdable{node}, nil
}

// globEscape escapes what SCAN's MATCH pattern would read as a wildcard.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
