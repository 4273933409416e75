package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// DefaultTimeout bounds each store call when [Options.Timeout] is zero. It
// matches the Limiter's default store timeout.
const DefaultTimeout = 50 * time.Millisecond

// Options configure a Store built by [New]. One of URL, SentinelMasterName
// with SentinelAddrs, or ClusterAddrs with HashTag is required.
type Options struct {
	// URL locates Redis: redis://[[user]:password@]host[:port][/db], or
	// rediss://… for TLS (server name from the host), or unix:///path.
	// Query parameters of redis.ParseURL are accepted (e.g.
	// ?dial_timeout=1s); the timeouts and retries the Store depends on are
	// set by the Store itself (see Timeout). With Sentinel, only the URL's
	// user, password, database and TLS are used, for the master; its host
	// is ignored and the URL may be empty.
	URL string
	// Timeout bounds each Reserve, Settle and Ping, from the call to the
	// answer, including waiting for a pooled connection and dialling one.
	// Zero means DefaultTimeout.
	Timeout time.Duration
	// PoolSize is how many connections per Redis server the Store's calls
	// share: each call holds one for its round trip, and calls beyond it
	// wait for a free one (within Timeout). Zero keeps the URL's pool_size
	// or go-redis's default of 10 per GOMAXPROCS.
	PoolSize int
	// MinIdleConns keeps that many connections open while idle, so that
	// a burst after a quiet period does not pay for dials within Timeout.
	MinIdleConns int
	// TLSConfig, when set, replaces the URL's TLS settings (e.g. to add a
	// CA or a client certificate). rediss:// alone verifies the server
	// against the system roots.
	TLSConfig *tls.Config

	// SentinelMasterName, when set, finds the master through Redis
	// Sentinel at SentinelAddrs (host:port each) and follows failovers.
	SentinelMasterName string
	SentinelAddrs      []string
	// SentinelUsername and SentinelPassword authenticate to the sentinels
	// (not to Redis: that is the URL's user and password).
	SentinelUsername string
	SentinelPassword string

	// ClusterAddrs, when set, connects to a Redis Cluster through these
	// seed nodes (host:port each). HashTag is then required. The URL, if
	// set, supplies only the user, password and TLS; its host is ignored.
	ClusterAddrs []string

	// HashTag, when set, puts every key the Store writes in the Redis
	// Cluster hash slot of "{HashTag}" by prefixing it, so that the keys of
	// one script always share a slot (see the package documentation). It
	// must not contain '{' or '}'.
	HashTag string
}

// Store is an [accounting.Store] on Redis, safe for concurrent use by any
// number of goroutines and tokenwarden replicas.
type Store struct {
	client  redis.UniversalClient
	owned   bool
	timeout time.Duration
	// prefix goes in front of every key: "{HashTag}" or "".
	prefix string
	// sentinelMaster is Options.SentinelMasterName, to name the server
	// in eviction checks (a failover client does not know its address).
	sentinelMaster string

	// offset (µs) is added to Redis's TIME inside the scripts, and
	// frozen (µs), when not zero, replaces TIME. Only the package's tests
	// set them, to drive the store's clock; in production both are zero.
	offset atomic.Int64
	frozen atomic.Int64
}

var _ accounting.Store = (*Store)(nil)

// New returns a Store connected to the Redis that opts describes. It does
// not contact Redis: a replica may start while Redis is down and serve by
// each limit's on_store_error until Redis answers.
func New(opts Options) (*Store, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	prefix, err := hashTagPrefix(opts.HashTag)
	if err != nil {
		return nil, err
	}
	var client redis.UniversalClient
	switch {
	case opts.SentinelMasterName != "" && len(opts.ClusterAddrs) > 0:
		return nil, errors.New("redisstore: both a sentinel master and cluster addresses")
	case opts.SentinelMasterName != "":
		client, err = newFailoverClient(opts, timeout)
	case len(opts.ClusterAddrs) > 0:
		client, err = newClusterClient(opts, timeout)
	default:
		client, err = newClient(opts, timeout)
	}
	if err != nil {
		return nil, err
	}
	return &Store{client: client, owned: true, timeout: timeout, prefix: prefix, sentinelMaster: opts.SentinelMasterName}, nil
}

// NewFromClient returns a Store on a client the caller built (for a
// *redis.ClusterClient, set Options.HashTag). Only opts.Timeout and
// opts.HashTag are used. The caller keeps the client: [Store.Close] leaves
// it open. Configure it as [New] does for the same guarantees: MaxRetries
// -1 (a Reserve retried after it ran would charge twice) and
// ContextTimeoutEnabled (so that Timeout bounds the call).
func NewFromClient(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	prefix, err := hashTagPrefix(opts.HashTag)
	if err != nil {
		return nil, err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Store{client: client, timeout: timeout, prefix: prefix}, nil
}

func hashTagPrefix(tag string) (string, error) {
	if tag == "" {
		return "", nil
	}
	if strings.ContainsAny(tag, "{}") {
		return "", fmt.Errorf("redisstore: hash tag %q must not contain '{' or '}'", tag)
	}
	return "{" + tag + "}", nil
}

func newClient(opts Options, timeout time.Duration) (*redis.Client, error) {
	if opts.URL == "" {
		return nil, errors.New("redisstore: no URL and no sentinel master name")
	}
	o, err := redis.ParseURL(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	if opts.PoolSize > 0 {
		o.PoolSize = opts.PoolSize
	}
	if opts.MinIdleConns > 0 {
		o.MinIdleConns = opts.MinIdleConns
	}
	if opts.TLSConfig != nil {
		o.TLSConfig = opts.TLSConfig
	}
	o.MaxRetries = -1
	o.ContextTimeoutEnabled = true
	o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout
	// One dial per call: go-redis's default retries a refused dial five
	// times 100ms apart, which no call's budget can wait for.
	o.DialerRetries = 1
	// Each new connection should cost one round trip (HELLO), not three:
	// under a 50ms budget the dial is part of the call. Open-source Redis
	// sends no maintenance notifications and ignores CLIENT SETINFO's
	// library name anyway.
	o.DisableIdentity = true
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return redis.NewClient(o), nil
}

func newFailoverClient(opts Options, timeout time.Duration) (*redis.Client, error) {
	if len(opts.SentinelAddrs) == 0 {
		return nil, errors.New("redisstore: sentinel master name without sentinel addresses")
	}
	fo := &redis.FailoverOptions{
		MasterName:       opts.SentinelMasterName,
		SentinelAddrs:    opts.SentinelAddrs,
		SentinelUsername: opts.SentinelUsername,
		SentinelPassword: opts.SentinelPassword,
		PoolSize:         opts.PoolSize,
		MinIdleConns:     opts.MinIdleConns,
		TLSConfig:        opts.TLSConfig,
	}
	if opts.URL != "" {
		o, err := redis.ParseURL(opts.URL)
		if err != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		fo.Username, fo.Password, fo.DB = o.Username, o.Password, o.DB
		if fo.TLSConfig == nil {
			fo.TLSConfig = o.TLSConfig
		}
	}
	fo.MaxRetries = -1
	fo.ContextTimeoutEnabled = true
	fo.ReadTimeout, fo.WriteTimeout, fo.PoolTimeout = timeout, timeout, timeout
	fo.DialerRetries = 1
	fo.DisableIdentity = true
	return redis.NewFailoverClient(fo), nil
}

func newClusterClient(opts Options, timeout time.Duration) (*redis.ClusterClient, error) {
	if opts.HashTag == "" {
		// Without one, a request's keys fall in different slots and
		// Redis Cluster refuses every multi-limit script.
		return nil, errors.New("redisstore: a Redis Cluster needs a hash tag (Options.HashTag)")
	}
	co := &redis.ClusterOptions{
		Addrs:        opts.ClusterAddrs,
		PoolSize:     opts.PoolSize,
		MinIdleConns: opts.MinIdleConns,
		TLSConfig:    opts.TLSConfig,
	}
	if opts.URL != "" {
		o, err := redis.ParseURL(opts.URL)
		if err != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
		co.Username, co.Password = o.Username, o.Password
		if co.TLSConfig == nil {
			co.TLSConfig = o.TLSConfig
		}
	}
	// MaxRedirects keeps its default: it follows MOVED after a failover
	// or resharding (and, in go-redis, also retries network errors).
	co.MaxRetries = -1
	co.ContextTimeoutEnabled = true
	co.ReadTimeout, co.WriteTimeout, co.PoolTimeout = timeout, timeout, timeout
	co.DialerRetries = 1
	co.DisableIdentity = true
	co.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return redis.NewClusterClient(co), nil
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
// with key counterKey: counterKey itself, behind the hash tag if any.
func (s *Store) RedisKey(counterKey string) string { return s.prefix + counterKey }

// Ping implements [accounting.Store]: a PING within the Store's timeout.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Ping(ctx).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}
