package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	n := len(counters)
	keys := make([]string, n)
	items := make([]byte, 0, 8*counterNums*n)
	z := zones{s: s}
	var err error
	for i := range counters {
		keys[i] = s.prefix + counters[i].Key
		if items, err = appendCounter(items, &counters[i], &z); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	reply, err := s.call(ctx, lib.peek, keys, items, &z).Text()
	if err != nil {
		return nil, unavailable(err)
	}
	if len(reply) != 8*2*n {
		return nil, unavailable(fmt.Errorf("tw_peek answered %d bytes for %d counters", len(reply), n))
	}
	out := make([]accounting.CounterUsage, n)
	for i := range out {
		out[i] = accounting.NewCounterUsage(&counters[i], num(reply, 2*i), accounting.Micros(num(reply, 2*i+1)))
	}
	return out, nil
}

// ResetCounter implements [accounting.Inspector] with a DEL of the
// counter's key.
func (s *Store) ResetCounter(ctx context.Context, key string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := s.client.Del(ctx, s.prefix+key).Result()
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
// Cluster the keys behind the hash tag all sit on one master, which is
// the one scanned; a cluster without a hash tag is refused.
func (s *Store) Top(ctx context.Context, req accounting.TopRequest) (accounting.TopResult, error) {
	scanner, err := s.scanner(ctx)
	if err != nil {
		return accounting.TopResult{}, err
	}
	match := globEscape(s.prefix+req.Prefix) + "*"
	var res accounting.TopResult
	seen := make(map[string]bool)
	var counters []accounting.Counter
	var cursor uint64
	truncated := false
	for budget := req.MaxScan; budget > 0 && !truncated; {
		count := min(budget, scanStep)
		budget -= count
		sctx, cancel := context.WithTimeout(ctx, s.timeout)
		page, next, err := scanner.Scan(sctx, cursor, match, int64(count)).Result()
		cancel()
		if err != nil {
			return accounting.TopResult{}, unavailable(err)
		}
		for _, k := range page {
			if seen[k] {
				// SCAN may return a key twice (the table was resized).
				continue
			}
			if len(counters) == req.MaxScan {
				truncated = true
				break
			}
			seen[k] = true
			c := req.Counter
			c.Key = strings.TrimPrefix(k, s.prefix)
			counters = append(counters, c)
		}
		if cursor = next; cursor == 0 {
			res.Complete = !truncated
			break
		}
	}
	res.Scanned = len(counters)
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

// scanner returns the client to SCAN: the Store's own, or on a Redis
// Cluster the master holding the hash tag's slot.
func (s *Store) scanner(ctx context.Context) (redis.Cmdable, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return s.client, nil
	}
	if s.prefix == "" {
		return nil, errors.New("redisstore: listing counters on a Redis Cluster needs a hash tag")
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	node, err := cc.MasterForKey(ctx, s.prefix)
	if err != nil {
		return nil, unavailable(err)
	}
	return node, nil
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
