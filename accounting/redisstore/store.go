package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// Store is an [accounting.Store] on Redis, safe for concurrent use by any
// number of goroutines and tokenwarden replicas.
type Store struct {
	client  redis.UniversalClient
	owned   bool
	timeout time.Duration
	// prefix goes in front of every key: "{HashTag}" or "".
	prefix string
	// shardBy is Options.ShardBy: when set, every key carries a hash tag
	// of its own (see shard.go) and prefix is "".
	shardBy string
	// sentinelMaster is Options.SentinelMasterName, to name the server
	// in eviction checks (a failover client does not know its address).
	sentinelMaster string
	// batch sends concurrent calls as pipelines, on a single server
	// (nil for a cluster client; see batcher).
	batch *batcher

	// offset (µs) is added to Redis's TIME inside the scripts, and
	// frozen (µs), when not zero, replaces TIME. Only the package's tests
	// set them, to drive the store's clock; in production both are zero.
	offset atomic.Int64
	frozen atomic.Int64
	// general keeps tw_reserve and tw_settle off their fast paths, so
	// that the package's tests hold the general path alone to the
	// contract; in production it is false.
	general atomic.Bool
	// skew (µs) is added to this replica's idea of the store's clock
	// when it computes a time zone's window boundaries: the package's
	// tests set it to show that Redis's clock picks the window.
	skew atomic.Int64
}

var _ accounting.Store = (*Store)(nil)

// New returns a Store connected to the Redis that opts describes. It
// fails if [Options.Validate] finds a problem; it does not contact Redis:
// a replica may start while Redis is down and serve by each limit's
// on_store_error until Redis answers.
func New(opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: invalid options: %w", err)
	}
	client, err := newClient(&opts)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	return &Store{
		client:         client,
		owned:          true,
		timeout:        opts.timeout(),
		prefix:         hashTagPrefix(opts.HashTag),
		shardBy:        opts.ShardBy,
		sentinelMaster: opts.SentinelMasterName,
		batch:          batcherFor(client),
	}, nil
}

// NewFromClient returns a Store on a client the caller built (for a
// *redis.ClusterClient, set Options.HashTag or Options.ShardBy). Only
// opts.Timeout, opts.HashTag and opts.ShardBy are used. The caller keeps the client: [Store.Close] leaves
// it open. Configure it as [New] does for the same guarantees: MaxRetries
// -1 (a Reserve retried after it ran would charge twice) and
// ContextTimeoutEnabled (so that Timeout bounds the call).
func NewFromClient(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if err := opts.validateStore(); err != nil {
		return nil, fmt.Errorf("redisstore: invalid options: %w", err)
	}
	return &Store{client: client, timeout: opts.timeout(), prefix: hashTagPrefix(opts.HashTag), shardBy: opts.ShardBy,
		batch: batcherFor(client)}, nil
}

// batcherFor is the batcher of a single server's (or a Sentinel-monitored
// master's) client, nil for any other.
func batcherFor(client redis.UniversalClient) *batcher {
	if c, ok := client.(*redis.Client); ok {
		return newBatcher(c)
	}
	return nil
}

// hashTagPrefix is the prefix of every key for a valid hash tag.
func hashTagPrefix(tag string) string {
	if tag == "" {
		return ""
	}
	return "{" + tag + "}"
}

// Close closes the Store's connections (not those of a client passed to
// NewFromClient). The Store must not be used afterwards.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	return s.client.Close()
}

// Client returns the Store's Redis client, e.g. for health checks or
// metrics hooks.
func (s *Store) Client() redis.UniversalClient { return s.client }

// RedisKey returns the Redis key under which the Store keeps the counter
// with key counterKey: counterKey itself, behind Options.HashTag if set,
// or behind the counter's own hash tag under Options.ShardBy (see
// [Store.ShardTag]).
func (s *Store) RedisKey(counterKey string) string {
	if s.shardBy != "" {
		return "{" + s.ShardTag(counterKey) + "}" + counterKey
	}
	return s.prefix + counterKey
}

// Ping implements [accounting.Store]: a PING within the Store's timeout.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Ping(ctx).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}
