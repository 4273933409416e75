package config

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/tokenizer"
)

const baseConfig = `
identity:
  attributes:
    tenant: {header: x-tenant-id}
    user: {header: X-User-Id}
    sub: {metadata: {namespace: envoy.filters.http.jwt_authn, key: payload, path: [sub]}}
    tier: {header: x-tier, default: free}
  required: [tenant]
models:
  gpt-4o-mini: {input: 0.15, cached_input: 0.075, output: 0.60}
  default: {input: 5, output: 15}
`

// parse parses config and fails the test on an error.
func parse(t *testing.T, config string) *Config {
	t.Helper()
	c, err := Parse([]byte(config))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestParseDefaults(t *testing.T) {
	c := parse(t, baseConfig+`
limits:
  - {name: tpm, dimension: tokens, scope: [tenant], limit: 50000, window: 1m}
  - {name: rpm, dimension: requests, scope: [], limit: 10, window: 1s}
  - {name: spend, dimension: cost, scope: [tenant, model], algorithm: fixed_window, limit: 50.25, window: day}
  - {name: monthly, dimension: cost, scope: [tenant], algorithm: fixed_window, limit: 1000, window: month, on_store_error: allow}
  - {name: bucket, dimension: tokens, scope: [user], algorithm: token_bucket, limit: 100, burst: 300, window: 7d}
`)
	if c.Listen != DefaultListen || c.Admin != DefaultAdmin || c.ShutdownGrace != DefaultShutdownGrace {
		t.Errorf("file defaults: got listen %q admin %q grace %v, want %q %q %v", c.Listen, c.Admin, c.ShutdownGrace, DefaultListen, DefaultAdmin, DefaultShutdownGrace)
	}
	if c.Log != (Log{Level: slog.LevelInfo}) || c.AdminPprof || c.Store.Redis != nil || c.Store.AllowEviction {
		t.Errorf("log, pprof, store: got %+v %v %+v, want info JSON, off, memory", c.Log, c.AdminPprof, c.Store)
	}
	// Library options the file leaves out stay zero: the library's
	// default applies.
	if c.Tokenizer.Mode != "" || c.Tokenizer.CharsPerToken != 0 || c.Server.DefaultOutputCap != 0 || c.Server.MaxBuffer != 0 ||
		c.Server.HiddenReasoningModels != nil || c.Accounting.SettleRetry != 0 || c.Server.CountOtherPaths {
		t.Errorf("library defaults: got tokenizer %+v, output cap %d, max buffer %d, reasoning %v, settle retry %v, count other paths %v; want zeros",
			c.Tokenizer, c.Server.DefaultOutputCap, c.Server.MaxBuffer, c.Server.HiddenReasoningModels, c.Accounting.SettleRetry, c.Server.CountOtherPaths)
	}
	if !c.Server.InjectOutputCap || !c.Server.InjectStreamUsage {
		t.Errorf("inject: got output cap %v, stream usage %v; want both on", c.Server.InjectOutputCap, c.Server.InjectStreamUsage)
	}
	if c.Server.Counter == nil {
		t.Errorf("Server.Counter: got nil, want the counter of the estimation section")
	}
	want := []accounting.Limit{
		{Name: "tpm", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.SlidingWindow, Limit: 50000, Window: time.Minute},
		{Name: "rpm", Dimension: accounting.Requests, Scope: []string{}, Algorithm: accounting.SlidingWindow, Limit: 10, Window: time.Second, OnStoreError: accounting.FailOpen},
		{Name: "spend", Dimension: accounting.Cost, Scope: []string{"tenant", "model"}, Algorithm: accounting.FixedWindow, Limit: 50_250_000, Window: 24 * time.Hour},
		{Name: "monthly", Dimension: accounting.Cost, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1_000_000_000, Calendar: accounting.CalendarMonth, OnStoreError: accounting.FailOpen},
		{Name: "bucket", Dimension: accounting.Tokens, Scope: []string{"user"}, Algorithm: accounting.TokenBucket, Limit: 100, Burst: 300, Window: 7 * 24 * time.Hour},
	}
	if len(c.Accounting.Limits) != len(want) {
		t.Fatalf("limits: got %d, want %d", len(c.Accounting.Limits), len(want))
	}
	for i, w := range want {
		g := c.Accounting.Limits[i]
		if g.Name != w.Name || g.Dimension != w.Dimension || strings.Join(g.Scope, ",") != strings.Join(w.Scope, ",") ||
			g.Algorithm != w.Algorithm || g.Limit != w.Limit || g.Burst != w.Burst || g.Window != w.Window ||
			g.Calendar != w.Calendar || g.OnStoreError != w.OnStoreError {
			t.Errorf("limit %d: got %+v, want %+v", i, g, w)
		}
	}
	if got, want := c.Accounting.Prices["gpt-4o-mini"], (accounting.Price{Input: 0.15, CachedInput: 0.075, Output: 0.60}); got != want {
		t.Errorf("price of gpt-4o-mini: got %+v, want %+v", got, want)
	}
	// Attributes come sorted by name, headers lower-cased.
	var got []string
	for _, a := range c.Server.Identity.Attributes {
		got = append(got, a.Name+"="+a.Header)
	}
	if strings.Join(got, " ") != "sub= tenant=x-tenant-id tier=x-tier user=x-user-id" {
		t.Errorf("identity: got %v, want sub (metadata), tenant, tier, user (x-user-id, lower-cased)", got)
	}
	if tier := c.Server.Identity.Attributes[2]; !tier.HasDefault || tier.Default != "free" {
		t.Errorf("tier's default: got %q (set %v), want free", tier.Default, tier.HasDefault)
	}
}

// TestParseEverySetting sets every key the file has and checks where it
// lands.
func TestParseEverySetting(t *testing.T) {
	c := parse(t, `
listen: 0.0.0.0:5000
admin: 0.0.0.0:9000
shutdown_grace: 3s
admin_pprof: true
strip_accept_encoding: true
other_paths: count
unmetered_apis: {openai.batches: allow, gemini.live: refuse}
log: {level: debug, format: text}
store:
  type: redis
  redis:
    url: redis://:pw@r:6379/1
    timeout: 80ms
    pool_size: 9
    min_idle_conns: 2
    hash_tag: tw
    cluster_addrs: [a:1]
    sentinel: {master_name: "", addrs: [], password: sp}
    allow_eviction: true
identity: {attributes: {tenant: {header: x-t}}, required: [tenant]}
estimation:
  tokenizer: exact
  chars_per_token: 3.5
  per_model: [{pattern: "claude-*", tokenizer: approximate, chars_per_token: 3}]
  exact_max_bytes: 1000
  default_image: {width: 512, height: 256}
  default_output_cap: 777
  inject_output_cap: false
  inject_stream_usage: false
settlement: {hidden_reasoning_models: [my-*], background: refuse, context_windows: {gpt-4o: 128000, "gemini-2.5*": 1048576}}
azure: {deployments: {prod: gpt-4o}}
`)
	if c.Listen != "0.0.0.0:5000" || c.Admin != "0.0.0.0:9000" || c.ShutdownGrace != 3*time.Second || !c.AdminPprof ||
		c.Log != (Log{Level: slog.LevelDebug, Text: true}) {
		t.Errorf("file settings: got %+v", c)
	}
	wantRedis := redisstore.Options{URL: "redis://:pw@r:6379/1", Timeout: 80 * time.Millisecond, PoolSize: 9, MinIdleConns: 2,
		HashTag: "tw", ClusterAddrs: []string{"a:1"}, SentinelAddrs: []string{}, SentinelPassword: "sp"}
	if r := c.Store.Redis; r == nil || r.URL != wantRedis.URL || r.Timeout != wantRedis.Timeout || r.PoolSize != 9 || r.MinIdleConns != 2 ||
		r.HashTag != "tw" || strings.Join(r.ClusterAddrs, ",") != "a:1" || r.SentinelPassword != "sp" || !c.Store.AllowEviction {
		t.Errorf("store: got %+v (allow eviction %v), want %+v (true)", r, c.Store.AllowEviction, wantRedis)
	}
	wantTok := tokenizer.Config{Mode: tokenizer.ModeExact, CharsPerToken: 3.5, ExactMaxBytes: 1000, DefaultImageWidth: 512, DefaultImageHeight: 256,
		PerModel: []tokenizer.Rule{{Pattern: "claude-*", Mode: tokenizer.ModeApproximate, CharsPerToken: 3}}}
	if g := c.Tokenizer; g.Mode != wantTok.Mode || g.CharsPerToken != wantTok.CharsPerToken || g.ExactMaxBytes != 1000 ||
		g.DefaultImageWidth != 512 || g.DefaultImageHeight != 256 || len(g.PerModel) != 1 || g.PerModel[0] != wantTok.PerModel[0] {
		t.Errorf("tokenizer: got %+v, want %+v", g, wantTok)
	}
	s := c.Server
	if s.DefaultOutputCap != 777 || s.InjectOutputCap || s.InjectStreamUsage || !s.StripAcceptEncoding || !s.CountOtherPaths || !s.RefuseBackground ||
		strings.Join(s.HiddenReasoningModels, ",") != "my-*" || s.AzureDeployments["prod"] != "gpt-4o" ||
		len(s.AllowUnmetered) != 1 || !s.AllowUnmetered["openai.batches"] ||
		len(s.ContextWindows) != 2 || s.ContextWindows["gpt-4o"] != 128000 || s.ContextWindows["gemini-2.5*"] != 1048576 {
		t.Errorf("server: got %+v", s)
	}
}

func TestParseSettlement(t *testing.T) {
	tests := []struct {
		name          string
		config        string
		wantReasoning []string // nil: the built-in list
		wantRefuse    bool
		wantAzure     map[string]string
	}{
		{"defaults", "", nil, false, nil},
		{"no hidden reasoning", "settlement: {hidden_reasoning_models: []}\n", []string{}, false, nil},
		{"null is the default", "settlement: {hidden_reasoning_models: null}\n", nil, false, nil},
		{"own list, refuse background", "settlement: {hidden_reasoning_models: [my-reasoner*], background: refuse}\n", []string{"my-reasoner*"}, true, nil},
		{"azure", "azure: {deployments: {prod-4o: gpt-4o}}\n", nil, false, map[string]string{"prod-4o": "gpt-4o"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := parse(t, baseConfig+tt.config).Server
			if (s.HiddenReasoningModels == nil) != (tt.wantReasoning == nil) || strings.Join(s.HiddenReasoningModels, ",") != strings.Join(tt.wantReasoning, ",") {
				t.Errorf("hidden reasoning: got %#v, want %#v", s.HiddenReasoningModels, tt.wantReasoning)
			}
			if s.RefuseBackground != tt.wantRefuse {
				t.Errorf("refuse background: got %v, want %v", s.RefuseBackground, tt.wantRefuse)
			}
			if len(s.AzureDeployments) != len(tt.wantAzure) || s.AzureDeployments["prod-4o"] != tt.wantAzure["prod-4o"] {
				t.Errorf("azure deployments: got %v, want %v", s.AzureDeployments, tt.wantAzure)
			}
		})
	}
}

func TestParseHeadersAndTiers(t *testing.T) {
	tests := []struct {
		name                      string
		config                    string
		wantIETF, wantNoAnthropic bool
		wantTiers                 map[string]float64
	}{
		{"defaults", "", false, false, nil},
		{"ietf on", "rate_limit_headers: {ietf: true}\n", true, false, nil},
		{"anthropic off", "rate_limit_headers: {anthropic: false}\n", false, true, nil},
		{"tiers", "service_tiers: {priority: 1.75, flex: 0.5}\n", false, false, map[string]float64{"priority": 1.75, "flex": 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := parse(t, baseConfig+tt.config).Server
			if s.IETFRateLimitHeaders != tt.wantIETF || s.NoAnthropicRateLimitHeaders != tt.wantNoAnthropic {
				t.Errorf("headers: got ietf %v, no anthropic %v; want %v, %v", s.IETFRateLimitHeaders, s.NoAnthropicRateLimitHeaders, tt.wantIETF, tt.wantNoAnthropic)
			}
			if len(s.ServiceTierFactors) != len(tt.wantTiers) || s.ServiceTierFactors["priority"] != tt.wantTiers["priority"] {
				t.Errorf("service tiers: got %v, want %v", s.ServiceTierFactors, tt.wantTiers)
			}
		})
	}
}

// TestParseStore: the store section becomes redisstore.Options only for
// the Redis store, and allow_eviction is off unless the file turns it on.
func TestParseStore(t *testing.T) {
	tests := []struct {
		name       string
		config     string
		wantRedis  bool
		wantTimout time.Duration
		wantAllow  bool
	}{
		{"none", "", false, 0, false},
		{"memory", "store: {type: memory}\n", false, 0, false},
		{"memory ignores the redis section", "store: {type: memory, redis: {url: 'redis://x', allow_eviction: true}}\n", false, 0, false},
		{"redis", "store: {type: redis, redis: {url: 'redis://127.0.0.1:6379/0'}}\n", true, 0, false},
		{"redis, timeout", "store: {type: redis, redis: {url: 'redis://x', timeout: 5s}}\n", true, 5 * time.Second, false},
		{"redis, allow eviction", "store: {type: redis, redis: {url: 'redis://x', allow_eviction: true}}\n", true, 0, true},
		{"redis, allow eviction false", "store: {type: redis, redis: {url: 'redis://x', allow_eviction: false}}\n", true, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := parse(t, baseConfig+tt.config).Store
			if (st.Redis != nil) != tt.wantRedis || st.AllowEviction != tt.wantAllow {
				t.Fatalf("store: got redis %+v, allow eviction %v; want redis %v, allow eviction %v", st.Redis, st.AllowEviction, tt.wantRedis, tt.wantAllow)
			}
			if st.Redis != nil && st.Redis.Timeout != tt.wantTimout {
				t.Errorf("timeout: got %v, want %v (zero: redisstore.DefaultTimeout applies)", st.Redis.Timeout, tt.wantTimout)
			}
		})
	}
}

// limitsConfig is baseConfig with limits, one per line of the argument.
func limitsConfig(limits ...string) string {
	return baseConfig + "limits:\n  - " + strings.Join(limits, "\n  - ") + "\n"
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string // the whole error
	}{
		// The file's shape.
		{"empty", "", "config: the file is empty"},
		{"only comments", "# nothing\n", "config: the file is empty"},
		{"not YAML", "listen: [\n", "config: yaml: line 1: did not find expected node content"},
		{"not a mapping", "- listen\n", "config: the file is not a mapping of options"},
		{"unknown top-level field", "lisen: 1.2.3.4:5\n", "config: lisen: unknown field"},
		{"unknown nested field", "store: {redis: {urll: x}}\n", "config: store.redis.urll: unknown field"},
		{"service tier factor not positive", "service_tiers: {priority: 0}\n", "config: service_tiers.priority: 0 is not a price factor (0 < factor ≤ 1000)"},
		{"unknown limit field", limitsConfig("{name: a, dimension: tokens, limit: 1, window: 1m, windw: 1m}"), "config: limits[0].windw: unknown field"},
		{"key twice", "listen: a:1\nlisten: b:2\n", "config: listen: given twice"},
		{"mapping instead of a value", "listen: {a: 1}\n", "config: listen: must be a single value, not a mapping"},
		{"value instead of a mapping", "store: redis\n", `config: store: must be a mapping, not "redis"`},
		{"value instead of a list", "identity: {required: tenant}\n", `config: identity.required: must be a list, not "tenant"`},
		{"not a number", limitsConfig("{name: a, dimension: tokens, limit: lots, window: 1m}"), `config: limits[0].limit: "lots" is not a number`},
		{"not a whole number", "store: {redis: {pool_size: many}}\n", `config: store.redis.pool_size: "many" is not a whole number`},
		// yaml.v3 alone would cut these to 2 and 100.
		{"fraction for a count", "store: {redis: {pool_size: 2.5}}\n", `config: store.redis.pool_size: "2.5" is not a whole number`},
		{"fraction for a cap", "estimation: {default_output_cap: 100.7}\n", `config: estimation.default_output_cap: "100.7" is not a whole number`},
		{"not a boolean", "admin_pprof: sometimes\n", `config: admin_pprof: "sometimes" is not true or false`},
		{"bad merge", "store: {<<: [x]}\n", `config: store: merges "x"; a merge key (<<) takes a mapping or a list of them`},

		// The file's own settings.
		{"bad listen", "listen: nowhere\n", `config: listen: "nowhere" is not host:port`},
		{"bad admin", "admin: nowhere\n", `config: admin: "nowhere" is not host:port`},
		{"bad grace", "shutdown_grace: -1s\n", `config: shutdown_grace: "-1s" is not a duration`},
		{"bad log level", "log: {level: loud}\n", `config: log.level: "loud" is not debug, info, warn or error`},
		{"bad log format", "log: {format: xml}\n", `config: log.format: "xml" is not json or text`},
		{"bad store type", "store: {type: etcd}\n", `config: store.type: "etcd" is not memory or redis`},
		{"bad redis timeout", "store: {type: redis, redis: {url: 'redis://x', timeout: fast}}\n", `config: store.redis.timeout: "fast" is not a positive duration`},
		{"zero redis timeout", "store: {type: redis, redis: {url: 'redis://x', timeout: 0s}}\n", `config: store.redis.timeout: "0s" is not a positive duration`},
		{"bad background", "settlement: {background: sometimes}\n", `config: settlement.background: "sometimes" is not reserve or refuse`},
		{"bad other paths", "other_paths: meter\n", `config: other_paths: "meter" is not pass or count`},
		{"bad unmetered policy", "unmetered_apis: {openai.batches: meter}\n", `config: unmetered_apis.openai.batches: "meter" is not refuse or allow`},
		{"unknown unmetered family refused", "unmetered_apis: {openai.batch: refuse}\n",
			"config: unmetered_apis.openai.batch: is not an unmetered API family (" + strings.Join(extproc.UnmeteredFamilies(), ", ") + ")"},
		{"unknown unmetered family allowed", "unmetered_apis: {openai.batch: allow}\n",
			"config: unmetered_apis.openai.batch: is not an unmetered API family (" + strings.Join(extproc.UnmeteredFamilies(), ", ") + ")"},
		{"scope without source", limitsConfig("{name: a, dimension: tokens, scope: [team], limit: 1, window: 1m}"),
			`config: limits[0].scope[0]: "team" has no source under identity.attributes (and is not model or api)`},
		{"match without source", limitsConfig("{name: a, dimension: tokens, match: {team: x}, limit: 1, window: 1m}"),
			`config: limits[0].match.team: "team" has no source under identity.attributes (and is not model or api)`},
		{"unknown dimension", limitsConfig("{name: a, dimension: dollars, limit: 1, window: 1m}"),
			`config: limits[0].dimension: unknown dimension "dollars" (want requests, tokens, cost or concurrent)`},
		{"unknown algorithm", limitsConfig("{name: a, dimension: tokens, algorithm: leaky, limit: 1, window: 1m}"),
			`config: limits[0].algorithm: unknown algorithm "leaky" (want sliding_window, fixed_window, token_bucket or lifetime)`},
		{"fractional token limit", limitsConfig("{name: a, dimension: tokens, limit: 1.5, window: 1m}"),
			"config: limits[0].limit: 1.5 must be a whole number of tokens"},
		{"absurd limit", limitsConfig("{name: a, dimension: tokens, limit: 1e20, window: 1m}"), "config: limits[0].limit: 1e+20 is out of range"},
		{"bad window", limitsConfig("{name: a, dimension: tokens, limit: 1, window: soon}"),
			`config: limits[0].window: "soon" is not a duration (e.g. 1m, 1h, 7d, day, month)`},
		{"bad days", limitsConfig("{name: a, dimension: tokens, limit: 1, window: xd}"), `config: limits[0].window: "xd" is not a duration`},
		{"no window", limitsConfig("{name: a, dimension: tokens, limit: 1}"), "config: limits[0].window: required"},
		{"bad on_store_error", limitsConfig("{name: a, dimension: tokens, limit: 1, window: 1m, on_store_error: maybe}"),
			`config: limits[0].on_store_error: "maybe" is not deny or allow`},

		// What the libraries say, named where the file has it.
		{"redis without url", "store: {type: redis}\n", "config: store.redis.url: required, unless sentinel.master_name or cluster_addrs is set"},
		{"redis bad url", "store: {type: redis, redis: {url: 'http://x'}}\n", "config: store.redis.url: must start with redis://, rediss:// or unix://"},
		{"cluster without hash tag", "store: {type: redis, redis: {cluster_addrs: ['127.0.0.1:7000']}}\n",
			"config: store.redis.hash_tag: required with cluster_addrs, unless shard_by is set: the keys of one call must share a slot"},
		{"shard_by without a source", "store: {type: redis, redis: {cluster_addrs: ['127.0.0.1:7000'], shard_by: tenant}}\n",
			`config: store.redis.shard_by: "tenant" has no source under identity.attributes`},
		{"shard_by with hash_tag", "store: {type: redis, redis: {cluster_addrs: ['127.0.0.1:7000'], shard_by: model, hash_tag: tw}}\n",
			"config: store.redis.shard_by: cannot be combined with hash_tag"},
		{"sentinel without addrs", "store: {type: redis, redis: {sentinel: {master_name: m}}}\n",
			"config: store.redis.sentinel.addrs: required with sentinel.master_name"},
		{"negative pool", "store: {type: redis, redis: {url: 'redis://x', pool_size: -1}}\n", "config: store.redis.pool_size: must not be negative"},
		{"attribute with two sources", "identity: {attributes: {t: {header: x, metadata: {namespace: n, key: k}}}}\n",
			"config: identity.attributes.t: needs exactly one source: header, metadata or envoy_attribute"},
		{"attribute without source", "identity: {attributes: {t: {}}}\n", "config: identity.attributes.t: needs exactly one source: header, metadata or envoy_attribute"},
		{"header and Envoy attribute", "identity: {attributes: {t: {header: x, envoy_attribute: xds.cluster_name}}}\n",
			"config: identity.attributes.t: needs exactly one source: header, metadata or envoy_attribute"},
		{"bad Envoy attribute", "identity: {attributes: {t: {envoy_attribute: ' xds.cluster_name'}}}\n",
			`config: identity.attributes.t.envoy_attribute: " xds.cluster_name" is not an Envoy attribute or CEL expression as request_attributes lists it`},
		{"reserved attribute", "identity: {attributes: {model: {header: x-model}}}\n",
			`config: identity.attributes.model: "model" is set by tokenwarden itself and cannot come from identity`},
		{"bad header name", "identity: {attributes: {t: {header: 'x y'}}}\n", `config: identity.attributes.t.header: "x y" is not a lower-case header name`},
		{"metadata without key", "identity: {attributes: {t: {metadata: {namespace: n}}}}\n", "config: identity.attributes.t.metadata: needs namespace and key"},
		{"required unknown", "identity: {attributes: {t: {header: x}}, required: [tenant]}\n", `config: identity.required[0]: "tenant" is not one of the attributes`},
		{"bad tokenizer", "estimation: {tokenizer: magic}\n", `config: estimation.tokenizer: "magic" is not "approximate" or "exact"`},
		{"bad chars per token", "estimation: {chars_per_token: -1}\n", "config: estimation.chars_per_token: -1 is outside 0.5..20"},
		{"per-model rule without pattern", "estimation: {per_model: [{tokenizer: exact}]}\n", "config: estimation.per_model[0].pattern: required"},
		{"per-model bad tokenizer", "estimation: {per_model: [{pattern: 'gpt-*', tokenizer: magic}]}\n",
			`config: estimation.per_model[0].tokenizer: "magic" is not "approximate" or "exact"`},
		{"half an image size", "estimation: {default_image: {width: 512}}\n", "config: estimation.default_image: set both width and height, or neither"},
		{"bad output cap", "estimation: {default_output_cap: -5}\n", "config: estimation.default_output_cap: -5 is outside 1..2147483647"},
		{"empty reasoning pattern", "settlement: {hidden_reasoning_models: ['o1*', '']}\n", "config: settlement.hidden_reasoning_models[1]: must not be empty"},
		{"context window of nothing", "settlement: {context_windows: {gpt-4o: 0}}\n", "config: settlement.context_windows.gpt-4o: 0 is outside 1..9007199254740992"},
		{"context window pattern", "settlement: {context_windows: {'gpt-*-mini': 128000}}\n", "config: settlement.context_windows.gpt-*-mini: '*' may only end a pattern"},
		{"fractional context window", "settlement: {context_windows: {gpt-4o: 1.5}}\n", `config: settlement.context_windows.gpt-4o: "1.5" is not a whole number`},
		{"azure deployment without a model", "azure: {deployments: {prod: ''}}\n", "config: azure.deployments.prod: needs a deployment name (no '/') and a model"},
		{"negative price", "models: {m: {input: -1}}\n", "config: models.m.input: -1 is not a price"},
		{"bad limit name", limitsConfig("{name: 'a b', dimension: tokens, limit: 1, window: 1m}"),
			`config: limits[0].name: "a b" must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit`},
		{"no limit name", limitsConfig("{dimension: tokens, limit: 1, window: 1m}"), "config: limits[0].name: required"},
		{"duplicate limit name", limitsConfig("{name: a, dimension: tokens, limit: 1, window: 1m}", "{name: a, dimension: tokens, limit: 1, window: 1m}"),
			`config: limits[1].name: "a" is also the name of limits[0]`},
		{"negative limit", limitsConfig("{name: a, dimension: tokens, limit: -5, window: 1m}"), "config: limits[0].limit: must be positive"},
		{"zero limit", limitsConfig("{name: a, dimension: tokens, limit: 0, window: 1m}"), "config: limits[0].limit: must be positive"},
		{"window too short", limitsConfig("{name: a, dimension: tokens, limit: 1, window: 10ms}"), "config: limits[0].window: 10ms is outside 1s..31d"},
		{"window too long", limitsConfig("{name: a, dimension: tokens, limit: 1, window: 32d}"), "config: limits[0].window: 768h0m0s is outside 1s..31d"},
		{"month on sliding", limitsConfig("{name: a, dimension: tokens, limit: 1, window: month}"),
			"config: limits[0].window: a calendar month needs algorithm fixed_window"},
		{"burst on fixed", limitsConfig("{name: a, dimension: tokens, algorithm: fixed_window, limit: 1, burst: 2, window: 1m}"),
			"config: limits[0].burst: only a token_bucket has a burst"},
		{"scope twice", limitsConfig("{name: a, dimension: tokens, scope: [tenant, tenant], limit: 1, window: 1m}"),
			`config: limits[0].scope[1]: "tenant" is listed twice`},
		{"cost without prices", "limits:\n  - {name: a, dimension: cost, limit: 1, window: 1m}\n",
			"config: limits[0]: a cost limit needs a price under models for every model (or a default entry)"},
		{"cost without default", "models: {gpt-4o: {input: 1, output: 2}}\nlimits:\n  - {name: a, dimension: cost, limit: 1, window: 1m}\n",
			"config: limits[0]: a cost limit needs a price under models for every model (or a default entry)"},
		{"cost for one model without its price", "models: {o3: {input: 1, output: 2}}\nlimits:\n  - {name: a, dimension: cost, match: {model: gpt-4o}, limit: 1, window: 1m}\n",
			`config: limits[0]: a cost limit needs a price under models for "gpt-4o" (or a default entry)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantParseError(t, tt.config, tt.want)
		})
	}
}

// TestParseReportsEveryProblem: a file with problems in every section
// gets one report with all of them, sorted by field (limits[2] before
// limits[10]), the same on every run whatever the order of Go's maps.
func TestParseReportsEveryProblem(t *testing.T) {
	var limits []string
	for i := range 11 {
		window := "1m"
		if i == 2 || i == 10 {
			window = "soon"
		}
		limits = append(limits, "{name: l"+string(rune('a'+i))+", dimension: tokens, limit: 1, window: "+window+"}")
	}
	config := `
listen: nowhere
lisen: x
log: {level: loud}
store: {type: redis, redis: {cluster_addrs: [a:1], sentinel: {master_name: m, addrs: [b:2]}, hash_tag: "{x}"}}
identity:
  attributes:
    zeta: {}
    alpha: {header: 'A B'}
    model: {header: x}
  required: [nobody]
models: {z: {input: -1}, a: {output: -2}}
estimation: {tokenizer: magic, default_output_cap: -1}
settlement: {background: never}
azure: {deployments: {x/y: m, a: ''}}
limits:
  - ` + strings.Join(limits, "\n  - ") + "\n"
	want := strings.Join([]string{
		`config: azure.deployments.a: needs a deployment name (no '/') and a model`,
		`config: azure.deployments.x/y: needs a deployment name (no '/') and a model`,
		`config: estimation.default_output_cap: -1 is outside 1..2147483647`,
		`config: estimation.tokenizer: "magic" is not "approximate" or "exact"`,
		`config: identity.attributes.alpha.header: "a b" is not a lower-case header name`,
		`config: identity.attributes.model: "model" is set by tokenwarden itself and cannot come from identity`,
		`config: identity.attributes.zeta: needs exactly one source: header, metadata or envoy_attribute`,
		`config: identity.required[0]: "nobody" is not one of the attributes`,
		`config: limits[2].window: "soon" is not a duration (e.g. 1m, 1h, 7d, day, month)`,
		`config: limits[10].window: "soon" is not a duration (e.g. 1m, 1h, 7d, day, month)`,
		`config: lisen: unknown field`,
		`config: listen: "nowhere" is not host:port`,
		`config: log.level: "loud" is not debug, info, warn or error`,
		`config: models.a.output: -2 is not a price`,
		`config: models.z.input: -1 is not a price`,
		`config: settlement.background: "never" is not reserve or refuse`,
		`config: store.redis.cluster_addrs: cannot be combined with sentinel`,
		`config: store.redis.hash_tag: "{x}" must not contain '{' or '}'`,
	}, "\n")
	for run := range 20 {
		_, err := Parse([]byte(config))
		got := "<nil>"
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Fatalf("run %d:\ngot\n%s\nwant\n%s", run, got, want)
		}
	}
	var perr *Error
	if _, err := Parse([]byte(config)); !errors.As(err, &perr) || len(perr.Problems) != 18 {
		t.Errorf("errors.As *Error: got %v, want 18 problems", perr)
	}
}

// TestParseLeavesOutFollowOnProblems: a value the file gives in an
// unusable form is reported once, not again by the library that would
// see its zero value.
func TestParseLeavesOutFollowOnProblems(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string
	}{
		{"limit not a number", limitsConfig("{name: a, dimension: tokens, limit: lots, window: 1m}"),
			`config: limits[0].limit: "lots" is not a number`},
		{"unknown dimension: the amounts are not read", limitsConfig("{name: a, dimension: dollars, limit: 1.5, burst: -2, window: 1m}"),
			`config: limits[0].dimension: unknown dimension "dollars" (want requests, tokens, cost or concurrent)`},
		{"unknown algorithm: burst and month are not judged", limitsConfig("{name: a, dimension: tokens, algorithm: token_buckett, burst: 5, limit: 1, window: month}"),
			`config: limits[0].algorithm: unknown algorithm "token_buckett" (want sliding_window, fixed_window, token_bucket or lifetime)`},
		{"window unreadable", limitsConfig("{name: a, dimension: tokens, limit: 1, window: soon}"),
			`config: limits[0].window: "soon" is not a duration (e.g. 1m, 1h, 7d, day, month)`},
		{"attribute not a mapping", "identity: {attributes: {t: x-tenant}}\n", `config: identity.attributes.t: must be a mapping, not "x-tenant"`},
		{"other problems of the limit stay", limitsConfig("{name: 'a b', dimension: dollars, limit: 1, window: 1m}"),
			"config: limits[0].dimension: unknown dimension \"dollars\" (want requests, tokens, cost or concurrent)\n" +
				`config: limits[0].name: "a b" must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantParseError(t, tt.config, tt.want)
		})
	}
}

// TestParseYAMLFeatures: anchors, aliases and merge keys read as yaml.v3
// reads them (a mapping's own keys win, then the merged ones in order),
// and what they bring in meets the same strict rules.
func TestParseYAMLFeatures(t *testing.T) {
	c := parse(t, baseConfig+`
limits:
  - &tokens {name: a, dimension: tokens, scope: &tenant [tenant], algorithm: fixed_window, limit: 10, window: 1h}
  - {<<: *tokens, name: b, limit: 20}
  - {<<: [{window: 1m, limit: 30}, *tokens], name: c, scope: *tenant}
`)
	var got []string
	for _, l := range c.Accounting.Limits {
		got = append(got, fmt.Sprintf("%s %s %v %s %d %v", l.Name, l.Dimension, l.Scope, l.Algorithm, l.Limit, l.Window))
	}
	want := []string{
		"a tokens [tenant] fixed_window 10 1h0m0s",
		"b tokens [tenant] fixed_window 20 1h0m0s",
		"c tokens [tenant] fixed_window 30 1m0s",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("limits:\ngot  %q\nwant %q", got, want)
	}

	_, err := Parse([]byte(baseConfig + `
limits:
  - {<<: {windw: 1m}, name: a, dimension: tokens, limit: 1, window: 1m}
`))
	if want := "config: limits[0].windw: unknown field"; err == nil || err.Error() != want {
		t.Errorf("an unknown key merged in: got %v, want %q", err, want)
	}
}

// TestParseBoundsAliases: a small file whose aliases multiply its values
// is refused rather than read for as long as it likes.
func TestParseBoundsAliases(t *testing.T) {
	scope := "[" + strings.Repeat("tenant, ", 999) + "tenant]"
	config := "limits: [&l {name: a, scope: " + scope + "}, " + strings.Repeat("*l, ", 199) + "*l]\n"
	_, err := Parse([]byte(config))
	if want := "config: the file holds more than 100000 values (aliases count each time they are used)"; err == nil || err.Error() != want {
		t.Errorf("got %.300v, want %q", err, want)
	}
}

func TestCostLimitForOneModelNeedsOnlyItsPrice(t *testing.T) {
	parse(t, "models: {gpt-4o: {input: 1, output: 2}}\nlimits:\n  - {name: a, dimension: cost, match: {model: gpt-4o}, limit: 1, window: 1m}\n")
}

func TestShippedConfigsAreValid(t *testing.T) {
	// Every tokenwarden config shipped with the project must load.
	paths := shippedConfigs()
	if len(paths) == 0 {
		t.Fatal("no shipped tokenwarden config found under envoy/ or deploy/")
	}
	for _, path := range paths {
		if _, err := Load(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

// shippedConfigs lists the tokenwarden config files shipped with the
// project (the compose and demo configs, the Kubernetes example).
func shippedConfigs() []string {
	var paths []string
	for _, pattern := range []string{"../envoy/*/tokenwarden*.yaml", "../deploy/*/*/tokenwarden*.yaml"} {
		found, _ := filepath.Glob(pattern)
		paths = append(paths, found...)
	}
	return paths
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenwarden.yaml")
	if err := os.WriteFile(path, []byte("listen: 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil || c.Listen != "127.0.0.1:1" {
		t.Errorf("Load: got %+v, %v; want listen 127.0.0.1:1", c, err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: got %v, want os.ErrNotExist", err)
	}
}

// TestEmbedderFlow runs the package documentation's example: the options
// Parse returns build a Limiter and a Server as they are, once the caller
// adds what a file cannot hold.
func TestEmbedderFlow(t *testing.T) {
	for _, path := range []string{"../cmd/tokenwarden/default.yaml", "../envoy/compose/tokenwarden.yaml"} {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			cfg, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			var store accounting.Store = memstore.New(memstore.Options{})
			if cfg.Store.Redis != nil {
				rs, err := redisstore.New(*cfg.Store.Redis)
				if err != nil {
					t.Fatalf("redisstore.New: %v", err)
				}
				defer rs.Close()
				store = rs
			}
			acc := cfg.Accounting
			acc.Store = store
			limiter, err := accounting.New(acc)
			if err != nil {
				t.Fatalf("accounting.New: %v", err)
			}
			so := cfg.Server
			so.Limiter = limiter
			srv, err := extproc.NewServer(so)
			if err != nil {
				t.Fatalf("extproc.NewServer: %v", err)
			}
			gs := grpc.NewServer(srv.ServerOptions()...)
			extproc.Register(gs, srv)
			gs.Stop()
		})
	}
}

func TestCompareFields(t *testing.T) {
	// In order, each before the next.
	sorted := []string{"", "a", "a.b", "a[2]", "a[10]", "a[10].b", "ab", "limits[9].x", "limits[10]", "limits[10].a", "z"}
	for i := range sorted {
		for j := range sorted {
			if got, want := compareFields(sorted[i], sorted[j]), cmp.Compare(i, j); got != want {
				t.Errorf("compareFields(%q, %q): got %d, want %d", sorted[i], sorted[j], got, want)
			}
		}
	}
	if got := compareFields("limits[09]", "limits[9]"); got != 0 {
		t.Errorf("compareFields(limits[09], limits[9]): got %d, want 0 (leading zeros do not count)", got)
	}
}

// wantParseError checks that Parse refuses config with exactly the error
// text want (every problem, one a line).
func wantParseError(t *testing.T, config, want string) {
	t.Helper()
	_, err := Parse([]byte(config))
	got := "<nil>"
	if err != nil {
		got = err.Error()
	}
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
