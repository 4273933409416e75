package main

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/config"
)

func TestEmbeddedDefaultConfigIsValid(t *testing.T) {
	cfg, err := loadConfig("")
	if err != nil {
		t.Fatalf("embedded default: %v", err)
	}
	if cfg.Store.Redis != nil || cfg.Listen != config.DefaultListen || cfg.Admin != config.DefaultAdmin || len(cfg.Accounting.Limits) == 0 {
		t.Errorf("embedded default: got redis %v, listen %s, admin %s, %d limits; want the memory store on the default addresses, with limits",
			cfg.Store.Redis, cfg.Listen, cfg.Admin, len(cfg.Accounting.Limits))
	}
}

// TestPrintConfig: check-config shows the effective settings, defaults
// filled in from the libraries' constants, and warns when the eviction
// check is off.
func TestPrintConfig(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		want    []string // lines that must be in the output
		wantNot []string // parts that must not be
	}{
		{"defaults", "limits: [{name: t, dimension: tokens, limit: 5, window: 1m}]\n", []string{
			"listen 127.0.0.1:50051, admin 127.0.0.1:9090, store memory",
			"estimation: tokenizer approximate, 4.00 chars/token, default output cap 4096, inject cap true, inject stream usage true",
			"hidden reasoning models [o1*, o3*, o4*, gpt-5*, codex-*, gemini-2.5*, gemini-3*, grok-3-mini*, grok-4*] keep their output cap; background responses: reserve",
			"1 limits:",
			"  t                        5 tokens per minute, global, sliding_window, on store error deny",
			"429s whose limit frees in more than 2m0s say x-should-retry: false and name the reset time (x-tokenwarden-reset-at)",
		}, []string{"allow_eviction", "max_message_timeout"}},
		{"downgrade", `
models: {default: {input: 1, output: 2}}
limits:
  - {name: 4o-daily, dimension: cost, limit: 50, window: day, match: {model: gpt-4o}, on_exhausted: {downgrade_to: gpt-4o-mini}}
`, []string{
			"  4o-daily                 $50.000000 cost per day, global, sliding_window, when model=gpt-4o, on store error deny; when exhausted, downgrades gpt-4o to gpt-4o-mini (reserved on gpt-4o-mini's limits, without a wait; x-tokenwarden-model: gpt-4o-mini for the routes)",
		}, nil},
		{"retry hint off", "rate_limit_headers: {should_retry_max: \"off\"}\n", []string{
			"429s with a reset time invite a retry however long the wait (should_retry_max off)",
		}, nil},
		{"wait then downgrade", `
models: {default: {input: 1, output: 2}}
limits:
  - {name: 4o-rps, dimension: requests, limit: 5, window: 1s, match: {model: gpt-4o}, on_exhausted: {wait_up_to: 2s, downgrade_to: gpt-4o-mini}}
`, []string{
			"  4o-rps                   5 requests per second, global, sliding_window, when model=gpt-4o, waits up to 2s for capacity when exhausted, on store error allow; when the wait ends refused, downgrades gpt-4o to gpt-4o-mini (reserved on gpt-4o-mini's limits, without a wait; x-tokenwarden-model: gpt-4o-mini for the routes)",
			"limits hold refused requests up to 2s: the ext_proc filter's max_message_timeout must be at least 3s",
		}, nil},
		{"settings", `
store: {type: redis, redis: {url: 'redis://127.0.0.1:6379/0', allow_eviction: true}}
identity: {attributes: {tenant: {header: X-Tenant}, sub: {metadata: {namespace: jwt, key: payload, path: [sub]}, default: anon}}, required: [tenant]}
estimation: {tokenizer: exact, chars_per_token: 3, default_output_cap: 100}
settlement: {hidden_reasoning_models: [], background: refuse}
azure: {deployments: {prod: gpt-4o}}
models: {default: {input: 1, output: 2}}
limits:
  - {name: spend, dimension: cost, scope: [tenant], algorithm: token_bucket, limit: 1.5, burst: 3, window: day, match: {model: gpt-4o}}
  - {name: monthly, dimension: requests, algorithm: fixed_window, limit: 9, window: month}
  - {name: in-flight, dimension: concurrent, scope: [tenant], limit: 4, lease: 10m}
  - {name: run-spend, dimension: cost, scope: [tenant], algorithm: lifetime, limit: 2, max_duration: 1h}
  - {name: rps, dimension: requests, scope: [tenant], limit: 5, window: 1s, on_exhausted: {wait_up_to: 2s}}
`, []string{
			"store redis",
			"store.redis.allow_eviction: true: Redis's maxmemory-policy is not checked",
			"estimation: tokenizer exact, 3.00 chars/token, default output cap 100",
			"hidden reasoning models [] keep their output cap; background responses: refuse (400)",
			"azure deployment prod serves model gpt-4o",
			"identity sub from metadata jwt/payload/sub (default \"anon\")",
			"identity tenant from header x-tenant",
			"required: tenant",
			"  spend                    $1.500000 cost per day, per tenant, token_bucket (burst $3.000000), when model=gpt-4o, on store error deny",
			"  monthly                  9 requests per calendar month, global, fixed_window, on store error allow",
			"  in-flight                4 requests in flight at once, per tenant, leases of a replica that dies free after 10 minutes, on store error allow",
			"  run-spend                $2.000000 cost in all, per tenant, lifetime (never resets; over 1 hour after the first request), on store error deny",
			"  rps                      5 requests per second, per tenant, sliding_window, waits up to 2s for capacity when exhausted, on store error allow",
			"limits hold refused requests up to 2s: the ext_proc filter's max_message_timeout must be at least 3s, or Envoy answers 504 when message_timeout expires",
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := printed(t, tt.config)
			for _, want := range tt.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			for _, not := range tt.wantNot {
				if strings.Contains(out.String(), not) {
					t.Errorf("output has %q:\n%s", not, out.String())
				}
			}
		})
	}
}

// printed returns what check-config prints for the config yaml, which
// must be valid.
func printed(t *testing.T, yaml string) *strings.Builder {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printConfig(&out, cfg)
	return &out
}
