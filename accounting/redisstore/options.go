package redisstore

import (
	"cmp"
	"crypto/tls"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// DefaultTimeout bounds each store call when [Options.Timeout] is zero.
//
// The Store is the one layer that bounds a call (the Limiter passes its
// caller's context through, see [accounting.Store]): it knows its
// network. 50ms is a few round trips within a region, and far below the
// ext_proc message timeout Envoy waits for the whole reservation.
const DefaultTimeout = 50 * time.Millisecond

// Options configure a Store built by [New]. One of URL, SentinelMasterName
// with SentinelAddrs, or ClusterAddrs with HashTag or ShardBy is required. The zero
// value of every other field is its default.
type Options struct {
	// URL locates Redis: redis://[[user]:password@]host[:port][/db], or
	// rediss://… for TLS (server name from the host), or unix:///path.
	// For a single server, the query parameters of redis.ParseURL are
	// accepted too (e.g. ?dial_timeout=1s); the timeouts and retries the
	// Store depends on are set by the Store itself (see Timeout). With
	// Sentinel or a cluster only the URL's user, password, database and
	// TLS are used; its host is ignored and the URL may be empty.
	URL string
	// Timeout bounds each Reserve, Settle, Release and Ping, from the call
	// to the answer, including waiting for a pooled connection and
	// dialling one, whatever the caller's context allows. Zero means
	// DefaultTimeout.
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
	// seed nodes (host:port each). HashTag or ShardBy is then required.
	ClusterAddrs []string

	// HashTag, when set, puts every key the Store writes in the Redis
	// Cluster hash slot of "{HashTag}" by prefixing it, so that the keys of
	// one call always share a slot (see the package documentation). It
	// must not contain '{' or '}'.
	HashTag string

	// ShardBy, when set, names the identity attribute (e.g. "tenant")
	// by which the Store spreads its keys over a Redis Cluster's slots:
	// the counters of limits scoped by it share a hash tag derived from
	// its value, so that one principal's limits reserve in one call, and
	// every other counter carries a tag of its own. A reservation whose
	// counters fall in several slots is made in steps, one per slot,
	// undoing the earlier ones when a later one fails (see the package
	// documentation, "Redis Cluster"). It cannot be combined with
	// HashTag.
	ShardBy string
}

// Validate reports every problem of the options, joined, each an
// [accounting.FieldError] named by its key under store.redis in
// tokenwarden's config file (url, hash_tag, sentinel.addrs, …). [New]
// calls it.
func (o *Options) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, accounting.FieldErrorf(field, format, args...))
	}
	sentinel, cluster := o.SentinelMasterName != "", len(o.ClusterAddrs) > 0
	switch {
	case o.URL != "":
		if err := validURL(o.URL); err != nil {
			errs = append(errs, &accounting.FieldError{Field: "url", Err: err})
		}
	case !sentinel && !cluster:
		bad("url", "required, unless sentinel.master_name or cluster_addrs is set")
	}
	if sentinel && len(o.SentinelAddrs) == 0 {
		bad("sentinel.addrs", "required with sentinel.master_name")
	}
	if sentinel && cluster {
		bad("cluster_addrs", "cannot be combined with sentinel")
	}
	if cluster && o.HashTag == "" && o.ShardBy == "" {
		// Without either, a request's keys fall in different slots and
		// Redis Cluster refuses every call that touches two limits.
		bad("hash_tag", "required with cluster_addrs, unless shard_by is set: the keys of one call must share a slot")
	}
	if o.PoolSize < 0 {
		bad("pool_size", "must not be negative")
	}
	if o.MinIdleConns < 0 {
		bad("min_idle_conns", "must not be negative")
	}
	errs = append(errs, o.validateStore())
	return errors.Join(errs...)
}

// validateStore checks the options that the Store itself uses, whoever
// built its client (see [NewFromClient]).
func (o *Options) validateStore() error {
	var errs []error
	if o.Timeout < 0 {
		errs = append(errs, accounting.FieldErrorf("timeout", "must not be negative"))
	}
	if strings.ContainsAny(o.HashTag, "{}") {
		errs = append(errs, accounting.FieldErrorf("hash_tag", "%q must not contain '{' or '}'", o.HashTag))
	}
	if o.ShardBy != "" && o.HashTag != "" {
		// A fixed tag puts every key in one slot: nothing to shard.
		errs = append(errs, accounting.FieldErrorf("shard_by", "cannot be combined with hash_tag"))
	}
	return errors.Join(errs...)
}

// validURL checks a URL as redis.ParseURL will read it. Its errors never
// repeat the URL, which may hold a password.
func validURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("is not a URL")
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
	default:
		return errors.New("must start with redis://, rediss:// or unix://")
	}
	if _, err := redis.ParseURL(s); err != nil {
		return err
	}
	return nil
}

func (o *Options) timeout() time.Duration { return cmp.Or(o.Timeout, DefaultTimeout) }
