package config

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting/regions"
)

// regionalStore is the store a region keeps its state in: a Redis its
// replicas share.
const regionalStore = "store: {type: redis, redis: {url: \"redis://r:6379\"}}\n"

const regionsLimit = "{name: company, dimension: tokens, algorithm: fixed_window, limit: 1000000, window: month, across_regions: true}"

func TestParseRegions(t *testing.T) {
	c := parse(t, limitsConfig(regionsLimit)+regionalStore+`regions:
  name: eu-west
  ledger: {url: "redis://ledger.example:6379/0", timeout: 500ms}
  lease_chunk: 0.1
  lease_ttl: 20s
  grace: 5s
  sync_interval: 2s
  acquire_timeout: 100ms
`)
	if c.Regions == nil {
		t.Fatal("got no Regions, want the section")
	}
	got, want := c.Regions.Region, regions.Options{Name: "eu-west", Chunk: 0.1, LeaseTTL: 20 * time.Second,
		Grace: 5 * time.Second, SyncInterval: 2 * time.Second, AcquireTimeout: 100 * time.Millisecond}
	if got.Name != want.Name || got.Chunk != want.Chunk || got.LeaseTTL != want.LeaseTTL || got.Grace != want.Grace ||
		got.SyncInterval != want.SyncInterval || got.AcquireTimeout != want.AcquireTimeout {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if l := c.Regions.Ledger; l.URL != "redis://ledger.example:6379/0" || l.Timeout != 500*time.Millisecond {
		t.Errorf("ledger: got %+v, want the url and a 500ms timeout", l)
	}
	if !c.Accounting.Limits[0].AcrossRegions {
		t.Error("limits[0].across_regions: got false, want true")
	}

	d := parse(t, limitsConfig(regionsLimit)+regionalStore+"regions: {name: eu, ledger: {url: \"redis://l:6379\"}}\n")
	if got := d.Regions.Ledger.Timeout; got != regions.DefaultLedgerTimeout {
		t.Errorf("ledger timeout by default: got %s, want regions.DefaultLedgerTimeout (%s)", got, regions.DefaultLedgerTimeout)
	}
}

func TestParseRegionsErrors(t *testing.T) {
	section := "\n" + regionalStore + "regions: {name: eu, ledger: {url: \"redis://l:6379\"}}\n"
	tests := []struct {
		name   string
		config string
		want   string
	}{
		{"across_regions without the section", limitsConfig(regionsLimit),
			"config: limits[0].across_regions: needs a regions section (the region's name and the ledger)"},
		{"sliding window", limitsConfig("{name: a, dimension: tokens, limit: 5, window: 1m, across_regions: true}") + section,
			"config: limits[0].across_regions: only a fixed_window limit (a calendar day or month included) can be kept across regions"},
		{"scoped", limitsConfig("{name: a, dimension: tokens, scope: [model], algorithm: fixed_window, limit: 5, window: month, across_regions: true}") + section,
			"config: limits[0].across_regions: a limit kept across regions has one global counter: it takes no scope"},
		{"no name", limitsConfig(regionsLimit) + "\n" + regionalStore + "regions: {ledger: {url: \"redis://l:6379\"}}\n",
			`config: regions.name: "" must be 1-64 letters, digits, '_', '.' or '-'`},
		{"no ledger", limitsConfig(regionsLimit) + "\n" + regionalStore + "regions: {name: eu}\n",
			"config: regions.ledger.url: required, unless sentinel.master_name or cluster_addrs is set"},
		{"ledger on a cluster", limitsConfig(regionsLimit) + "\n" + regionalStore + "regions: {name: eu, ledger: {cluster_addrs: [\"a:1\"], hash_tag: t}}\n",
			"config: regions.ledger: the ledger runs on one Redis server or a Sentinel-monitored one, not a cluster (no cluster_addrs, hash_tag or shard_by)"},
		{"ledger sharded", limitsConfig(regionsLimit) + "\n" + regionalStore + "regions: {name: eu, ledger: {url: \"redis://a:1\", shard_by: tenant}}\n",
			"config: regions.ledger: the ledger runs on one Redis server or a Sentinel-monitored one, not a cluster (no cluster_addrs, hash_tag or shard_by)"},
		{"bad chunk", limitsConfig(regionsLimit) + "\n" + regionalStore + "regions: {name: eu, ledger: {url: \"redis://l:6379\"}, lease_chunk: 2}\n",
			"config: regions.lease_chunk: 2 is outside (0, 1]"},
		{"bad ttl", limitsConfig(regionsLimit) + "\n" + regionalStore + "regions: {name: eu, ledger: {url: \"redis://l:6379\"}, lease_ttl: soon}\n",
			`config: regions.lease_ttl: "soon" is not a positive duration`},
		{"ttl within a sync", limitsConfig(regionsLimit) + "\n" + regionalStore + "regions: {name: eu, ledger: {url: \"redis://l:6379\"}, lease_ttl: 5s, sync_interval: 5s}\n",
			"config: regions.lease_ttl: 5s must exceed sync_interval (5s)"},
		{"grace within the store's timeout", limitsConfig(regionsLimit) + "\nstore: {type: redis, redis: {url: \"redis://r:6379\", timeout: 2s}}\nregions: {name: eu, ledger: {url: \"redis://l:6379\"}, grace: 2s}\n",
			"config: regions.grace: 2s must exceed store.redis.timeout (2s): a reservation sent as the lease lapses lands up to that much later"},
		{"default grace within the store's timeout", limitsConfig(regionsLimit) + "\nstore: {type: redis, redis: {url: \"redis://r:6379\", timeout: 15s}}\nregions: {name: eu, ledger: {url: \"redis://l:6379\"}}\n",
			"config: regions.grace: 10s must exceed store.redis.timeout (15s): a reservation sent as the lease lapses lands up to that much later"},
		{"unknown key", limitsConfig(regionsLimit) + "\n" + regionalStore + "regions: {name: eu, ledger: {url: \"redis://l:6379\"}, lease_tll: 5s}\n",
			"config: regions.lease_tll: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantParseError(t, tt.config, tt.want)
		})
	}
}
