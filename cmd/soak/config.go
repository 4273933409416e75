package main

import (
	"fmt"
	"time"
)

// hotTenants is how many tenants have tier "hot": their small token
// limit makes them the tenants that get 429s, whatever the rate.
const hotTenants = 4

// Limit names, for the report's rejections by limit.
const (
	limitTenantTokens = "soak-tenant-tokens"
	limitHotTokens    = "soak-hot-tokens"
	limitUserRequests = "soak-user-requests"
	limitGlobal       = "soak-global-requests"
	limitConcurrent   = "soak-tenant-concurrent"
)

// tokenwardenConfig is tokenwarden's config for the soak: the identity
// envoy.yaml hands over (tenant and tier from the verified JWT's claims,
// the user from its payload), the Redis store, and one limit of each kind
// that lives in Redis, all on window so that the counters expire soon
// after the traffic stops:
//
//   - per-tenant tokens, a fixed window nobody reaches (one counter per
//     tenant, the common case);
//   - the hot tenants' tokens, a sliding window small enough that most of
//     their requests get 429;
//   - per-user requests, a sliding window nobody reaches;
//   - global requests, one counter every request charges (the hot key);
//   - per-tenant concurrency, a lease per request in flight.
//
// The store timeout is 200ms rather than 50ms: the soak shares its cores
// with Envoy, Redis and the load it generates, and a store call that
// waits for a core is not what it measures.
func tokenwardenConfig(listen, admin, redisURL string, window time.Duration) string {
	w := fmt.Sprintf("%ds", int(window/time.Second))
	lease := w
	if window < 5*time.Second {
		// Longer than the slowest request (a cancelled stream's 20
		// chunks) on a busy machine.
		lease = "5s"
	}
	return fmt.Sprintf(`listen: %s
admin: %s
admin_pprof: true
log: {level: warn, format: text}
shutdown_grace: 5s
store:
  type: redis
  redis: {url: %q, timeout: 200ms}
identity:
  attributes:
    tenant: {header: x-tenant-id}
    tier:   {header: x-tier, default: standard}
    user:   {metadata: {namespace: envoy.filters.http.jwt_authn, key: payload, path: [sub]}}
  required: [tenant]
estimation:
  tokenizer: approximate
  chars_per_token: 4
  default_output_cap: 256
  inject_output_cap: true
  inject_stream_usage: true
limits:
  - {name: %s, dimension: tokens, scope: [tenant], algorithm: fixed_window, limit: 100000000, window: %s}
  - {name: %s, dimension: tokens, scope: [tenant], match: {tier: hot}, algorithm: sliding_window, limit: 500, window: %s}
  - {name: %s, dimension: requests, scope: [tenant, user], algorithm: sliding_window, limit: 10000000, window: %s}
  - {name: %s, dimension: requests, scope: [], algorithm: fixed_window, limit: 1000000000, window: %s}
  - {name: %s, dimension: concurrent, scope: [tenant], limit: 8, lease: %s}
`, listen, admin, redisURL,
		limitTenantTokens, w, limitHotTokens, w, limitUserRequests, w, limitGlobal, w, limitConcurrent, lease)
}
