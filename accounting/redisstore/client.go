package redisstore

import (
	"errors"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// newClient builds the client [New] runs the Store on, for a single
// server, a Sentinel-monitored master or a cluster, from valid options.
func newClient(opts *Options) (redis.UniversalClient, error) {
	u, err := clientOptions(opts)
	if err != nil {
		return nil, err
	}
	return redis.NewUniversalClient(u), nil
}

// clientOptions describes the client of opts: where the servers are, and
// the settings the Store's guarantees depend on, which are the same for
// every kind of client.
func clientOptions(opts *Options) (*redis.UniversalOptions, error) {
	u := &redis.UniversalOptions{}
	var fromURL *redis.Options
	if opts.URL != "" {
		var err error
		if fromURL, err = redis.ParseURL(opts.URL); err != nil {
			return nil, err
		}
		u.Username, u.Password, u.DB, u.TLSConfig = fromURL.Username, fromURL.Password, fromURL.DB, fromURL.TLSConfig
	}
	switch {
	case opts.SentinelMasterName != "":
		u.MasterName, u.Addrs = opts.SentinelMasterName, opts.SentinelAddrs
		u.SentinelUsername, u.SentinelPassword = opts.SentinelUsername, opts.SentinelPassword
	case len(opts.ClusterAddrs) > 0:
		// MaxRedirects keeps its default: it follows MOVED after a
		// failover or resharding (and, in go-redis, also retries network
		// errors). IsClusterMode makes one seed node a cluster too.
		u.Addrs, u.IsClusterMode = opts.ClusterAddrs, true
	case fromURL == nil:
		return nil, errors.New("no URL, sentinel master name or cluster address")
	default:
		// A single server: the URL says where, and its query parameters
		// how to connect (those that matter to the Store are set below).
		u.Addrs = []string{fromURL.Addr}
		u.Protocol, u.ClientName = fromURL.Protocol, fromURL.ClientName
		u.MinRetryBackoff, u.MaxRetryBackoff = fromURL.MinRetryBackoff, fromURL.MaxRetryBackoff
		u.DialTimeout = fromURL.DialTimeout
		u.PoolFIFO, u.PoolSize, u.MaxConcurrentDials = fromURL.PoolFIFO, fromURL.PoolSize, fromURL.MaxConcurrentDials
		u.MinIdleConns, u.MaxIdleConns, u.MaxActiveConns = fromURL.MinIdleConns, fromURL.MaxIdleConns, fromURL.MaxActiveConns
		u.PipelinePoolSize = fromURL.PipelinePoolSize
		u.PipelineReadBufferSize, u.PipelineWriteBufferSize = fromURL.PipelineReadBufferSize, fromURL.PipelineWriteBufferSize
		u.ConnMaxIdleTime, u.ConnMaxLifetime, u.ConnMaxLifetimeJitter = fromURL.ConnMaxIdleTime, fromURL.ConnMaxLifetime, fromURL.ConnMaxLifetimeJitter
	}
	if opts.PoolSize > 0 {
		u.PoolSize = opts.PoolSize
	}
	if opts.MinIdleConns > 0 {
		u.MinIdleConns = opts.MinIdleConns
	}
	if opts.TLSConfig != nil {
		u.TLSConfig = opts.TLSConfig
	}

	// What the Store depends on, whatever the URL says.
	//
	// No retries: a Reserve retried after it ran would charge twice.
	u.MaxRetries = -1
	// The Store's Timeout bounds the whole call, pool wait and dial
	// included, through the context it sets.
	timeout := opts.timeout()
	u.ContextTimeoutEnabled = true
	u.ReadTimeout, u.WriteTimeout, u.PoolTimeout = timeout, timeout, timeout
	// One dial per call: go-redis's default retries a refused dial five
	// times 100ms apart, which no call's budget can wait for.
	u.DialerRetries = 1
	// Each new connection should cost one round trip (HELLO), not three:
	// under a 50ms budget the dial is part of the call. Open-source Redis
	// sends no maintenance notifications and ignores CLIENT SETINFO's
	// library name anyway. (A failover client has no maintenance
	// notifications to turn off.)
	u.DisableIdentity = true
	u.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return u, nil
}
