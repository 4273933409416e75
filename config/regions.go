package config

import (
	"cmp"
	"fmt"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
	"github.com/tokenwarden/tokenwarden/accounting/regions"
)

// Regions is the regions section: this server's region, and the ledger
// all regions share, for the limits marked across_regions.
type Regions struct {
	// Region holds the region's name and its lease settings; set Store,
	// Ledger, Logger and Metrics before passing it to regions.New.
	Region regions.Options
	// Ledger locates the global Redis the ledger is kept in, read as
	// store.redis is; its Timeout is the ledger calls' bound
	// (regions.DefaultLedgerTimeout when the file sets none).
	Ledger redisstore.Options
}

// regionsFile is the regions section as written.
type regionsFile struct {
	Name           string    `yaml:"name"`
	Ledger         redisFile `yaml:"ledger"`
	LeaseChunk     float64   `yaml:"lease_chunk"`
	LeaseTTL       string    `yaml:"lease_ttl"`
	Grace          string    `yaml:"grace"`
	SyncInterval   string    `yaml:"sync_interval"`
	AcquireTimeout string    `yaml:"acquire_timeout"`
}

func (c *Config) regions(f *file, p *problems) {
	rf := f.Regions
	if rf == nil {
		for i, l := range f.Limits {
			if l.Across {
				p.add(fmt.Sprintf("limits[%d].across_regions", i), "needs a regions section (the region's name and the ledger)")
			}
		}
		return
	}
	if c.Store.Redis == nil {
		// The region's grants, returns and spending are counters in its
		// store. A memory store is one replica's and dies with it: each
		// replica, or one restarted, would raise its cap to all the
		// ledger granted the region on a counter that starts at zero,
		// and spend the budget again.
		p.add("regions", "a region keeps its leases in its store, which its replicas must share and which must outlive a restart: needs store.type redis")
	}
	r := &Regions{Region: regions.Options{Name: rf.Name, Chunk: rf.LeaseChunk}}
	for _, d := range []struct {
		field string
		in    string
		out   *time.Duration
	}{
		{"lease_ttl", rf.LeaseTTL, &r.Region.LeaseTTL},
		{"grace", rf.Grace, &r.Region.Grace},
		{"sync_interval", rf.SyncInterval, &r.Region.SyncInterval},
		{"acquire_timeout", rf.AcquireTimeout, &r.Region.AcquireTimeout},
	} {
		if d.in == "" {
			continue
		}
		v, err := time.ParseDuration(d.in)
		if err != nil || v <= 0 {
			p.add("regions."+d.field, "%q is not a positive duration", d.in)
			continue
		}
		*d.out = v
	}
	if c.Store.Redis != nil {
		// A reservation sent just before the lease lapses lands up to
		// the store's timeout later: the ledger must not hand the lease
		// on before it has landed.
		storeTimeout := cmp.Or(c.Store.Redis.Timeout, redisstore.DefaultTimeout)
		if grace := cmp.Or(r.Region.Grace, regions.DefaultGrace); grace <= storeTimeout {
			p.add("regions.grace", "%s must exceed store.redis.timeout (%s): a reservation sent as the lease lapses lands up to that much later", grace, storeTimeout)
		}
	}
	lf := &rf.Ledger
	r.Ledger = lf.options("regions.ledger", regions.DefaultLedgerTimeout, p)
	if lf.HashTag != "" || len(lf.ClusterAddrs) > 0 || lf.ShardBy != "" {
		// A few small hashes, one call a sync interval per replica: one
		// server (with Sentinel for failover) carries it.
		p.add("regions.ledger", "the ledger runs on one Redis server or a Sentinel-monitored one, not a cluster (no cluster_addrs, hash_tag or shard_by)")
	}
	if lf.AllowEviction {
		// The ledger has no counters to lose to eviction: its records
		// hold every region's lease, and an evicted one grants the
		// window afresh. The key would promise what it cannot.
		p.add("regions.ledger.allow_eviction", "the ledger must keep every record; it has no allow_eviction")
	}
	p.library(accounting.PrefixFields("regions", r.Region.Validate()))
	p.library(accounting.PrefixFields("regions.ledger", r.Ledger.Validate()))
	c.Regions = r
}
