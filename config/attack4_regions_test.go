package config

import "testing"

// A region keeps its state (what the ledger granted it, what it spent
// and gave back) in its store. The memory store is neither shared by the
// region's replicas nor kept across a restart: every replica, and every
// restarted one, would raise its cap to all the ledger granted the
// region, on a counter of its own that starts at zero, and spend the
// budget again. So the regions section needs the Redis store.
func TestParseRegionsNeedsRedisStore(t *testing.T) {
	section := "regions: {name: eu, ledger: {url: \"redis://l:6379\"}}\n"
	want := "config: regions: a region keeps its leases in its store, which its replicas must share and which must outlive a restart: needs store.type redis"
	for _, tt := range []struct{ name, store string }{
		{"default store", ""},
		{"memory store", "store: {type: memory}\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantParseError(t, limitsConfig(regionsLimit)+tt.store+section, want)
		})
	}
}
