package redisstore

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// The scripts share counter.lua, the algorithms' arithmetic, so that a
// reservation and a settlement can never disagree about a counter.
var (
	//go:embed counter.lua
	counterLua string
	//go:embed reserve.lua
	reserveLua string
	//go:embed settle.lua
	settleLua string

	// reserveScript and settleScript run by EVALSHA, falling back to EVAL
	// (which caches them again) when Redis does not know them, e.g. after a
	// restart or SCRIPT FLUSH.
	reserveScript = redis.NewScript(counterLua + reserveLua)
	settleScript  = redis.NewScript(counterLua + settleLua)
)

// DefaultTimeout bounds each store call when [Options.Timeout] is zero. It
// matches the Limiter's default store timeout.
const DefaultTimeout = 50 * time.Millisecond

// SettledKeyPrefix starts the key that remembers a settled reservation ID
// (followed by the ID) for [accounting.SettledTTL].
const SettledKeyPrefix = accounting.KeyPrefix + "settled:"

// maxExact bounds every integer sent to the scripts: Lua numbers are
// doubles, exact up to 2^53 (9e15 tokens, or 9e9 USD in micro-dollars).
const maxExact = 1 << 53

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

// unavailable marks err as a store failure so that the Limiter applies
// each limit's on_store_error.
func unavailable(err error) error {
	return fmt.Errorf("%w: %w", accounting.ErrStoreUnavailable, err)
}

// counterArgs appends the algorithm code, limit, capacity and period that
// the scripts take for c.
func counterArgs(args []any, c *accounting.Counter) ([]any, error) {
	var alg string
	var period int64
	switch c.Algorithm {
	case accounting.FixedWindow:
		alg, period = "f", c.Window.Microseconds()
		if c.Calendar == accounting.CalendarMonth {
			alg, period = "m", 1
		}
	case accounting.SlidingWindow:
		alg, period = "s", accounting.SlotLength(c)
	case accounting.TokenBucket:
		alg, period = "b", c.Window.Microseconds()
	default:
		return nil, fmt.Errorf("redisstore: counter %q: unknown algorithm %v", c.Key, c.Algorithm)
	}
	if period <= 0 {
		return nil, fmt.Errorf("redisstore: counter %q: window %v is too short", c.Key, c.Window)
	}
	limit, capacity := c.Limit, c.Capacity()
	if err := exact(c.Key, limit, capacity); err != nil {
		return nil, err
	}
	return append(args, alg, limit, capacity, period), nil
}

// exact reports an error for numbers a Lua double could not hold exactly.
func exact(key string, vals ...int64) error {
	for _, v := range vals {
		if v > maxExact || v < -maxExact {
			return fmt.Errorf("redisstore: counter %q: %d is out of range (|x| <= 2^53)", key, v)
		}
	}
	return nil
}

// head returns the script arguments that precede the items'.
func (s *Store) head(args []any) []any {
	var clock any = s.offset.Load()
	if f := s.frozen.Load(); f != 0 {
		clock = "@" + strconv.FormatInt(f, 10)
	}
	return append(args, clock, int64(accounting.SlidingSlots), accounting.SettledTTL.Microseconds())
}

const (
	headArgs   = 3
	reserveArg = 5 // script arguments per reserved item
	settleArg  = 7 // per settled item
	stateVals  = 6 // integers per item state in reserve's reply
)

// Reserve implements [accounting.Store] with one script call.
func (s *Store) Reserve(ctx context.Context, req accounting.ReserveRequest) (accounting.ReserveResult, error) {
	n := len(req.Items)
	res := accounting.ReserveResult{States: make([]accounting.CounterState, n)}
	if n == 0 {
		// Nothing to check; the same answer memstore gives.
		res.Admitted = true
		return res, nil
	}
	keys := make([]string, n)
	args := s.head(make([]any, 0, headArgs+reserveArg*n))
	var err error
	for i := range req.Items {
		it := &req.Items[i]
		keys[i] = s.prefix + it.Key
		if args, err = counterArgs(args, &it.Counter); err != nil {
			return accounting.ReserveResult{}, err
		}
		if err := exact(it.Key, it.Amount); err != nil {
			return accounting.ReserveResult{}, err
		}
		args = append(args, it.Amount)
	}

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	vals, err := reserveScript.Run(ctx, s.client, keys, args...).Int64Slice()
	if err != nil {
		return accounting.ReserveResult{}, unavailable(err)
	}
	if len(vals) != 1+stateVals*n {
		return accounting.ReserveResult{}, unavailable(fmt.Errorf("reserve script answered %d values for %d items", len(vals), n))
	}
	res.Admitted = vals[0] == 1
	for i := range res.States {
		v := vals[1+stateVals*i:]
		res.States[i] = accounting.CounterState{
			Remaining:  v[0],
			Reset:      accounting.Micros(v[1]),
			Fits:       v[2] == 1,
			RetryAfter: accounting.Micros(v[3]),
			NeverFits:  v[4] == 1,
			Mark:       v[5],
		}
	}
	return res, nil
}

// Settle implements [accounting.Store] with one script call. The script
// first checks and sets the reservation's settled marker, in the same
// atomic step as the corrections, so a settlement retried after an
// ambiguous failure (it did land, the answer was lost) is a no-op.
func (s *Store) Settle(ctx context.Context, req accounting.SettleRequest) error {
	n := len(req.Items)
	keys := make([]string, 1, 1+n)
	keys[0] = s.prefix + SettledKeyPrefix + req.ID
	args := s.head(make([]any, 0, headArgs+settleArg*n))
	var err error
	for i := range req.Items {
		it := &req.Items[i]
		keys = append(keys, s.prefix+it.Key)
		if args, err = counterArgs(args, &it.Counter); err != nil {
			return err
		}
		if err := exact(it.Key, it.Reserved, it.Actual, it.Mark); err != nil {
			return err
		}
		args = append(args, it.Reserved, it.Actual, it.Mark)
	}

	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := settleScript.Run(ctx, s.client, keys, args...).Err(); err != nil {
		return unavailable(err)
	}
	return nil
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
