package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
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

func TestParseConfigDefaults(t *testing.T) {
	s, err := ParseConfig([]byte(baseConfig + `
limits:
  - {name: tpm, dimension: tokens, scope: [tenant], limit: 50000, window: 1m}
  - {name: rpm, dimension: requests, scope: [], limit: 10, window: 1s}
  - {name: spend, dimension: cost, scope: [tenant, model], algorithm: fixed_window, limit: 50.25, window: day}
  - {name: monthly, dimension: cost, scope: [tenant], algorithm: fixed_window, limit: 1000, window: month, on_store_error: allow}
  - {name: bucket, dimension: tokens, scope: [user], algorithm: token_bucket, limit: 100, burst: 300, window: 7d}
`))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	if s.Listen != "127.0.0.1:50051" || s.Admin != "127.0.0.1:9090" || s.Store.Type != "memory" {
		t.Errorf("defaults: got listen %q admin %q store %q", s.Listen, s.Admin, s.Store.Type)
	}
	if s.Store.Timeout != 50*time.Millisecond || s.OutputCap != 4096 || s.CharsPerToken != 4 || !s.InjectCap || !s.InjectUsage || s.Tokenizer != "approximate" {
		t.Errorf("estimation defaults: got %+v", s)
	}
	want := []accounting.Limit{
		{Name: "tpm", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Algorithm: accounting.SlidingWindow, Limit: 50000, Window: time.Minute},
		{Name: "rpm", Dimension: accounting.Requests, Scope: []string{}, Algorithm: accounting.SlidingWindow, Limit: 10, Window: time.Second, OnStoreError: accounting.FailOpen},
		{Name: "spend", Dimension: accounting.Cost, Scope: []string{"tenant", "model"}, Algorithm: accounting.FixedWindow, Limit: 50_250_000, Window: 24 * time.Hour},
		{Name: "monthly", Dimension: accounting.Cost, Scope: []string{"tenant"}, Algorithm: accounting.FixedWindow, Limit: 1_000_000_000, Calendar: accounting.CalendarMonth, OnStoreError: accounting.FailOpen},
		{Name: "bucket", Dimension: accounting.Tokens, Scope: []string{"user"}, Algorithm: accounting.TokenBucket, Limit: 100, Burst: 300, Window: 7 * 24 * time.Hour},
	}
	if len(s.Limits) != len(want) {
		t.Fatalf("limits: got %d, want %d", len(s.Limits), len(want))
	}
	for i, w := range want {
		g := s.Limits[i]
		if g.Name != w.Name || g.Dimension != w.Dimension || strings.Join(g.Scope, ",") != strings.Join(w.Scope, ",") ||
			g.Algorithm != w.Algorithm || g.Limit != w.Limit || g.Burst != w.Burst || g.Window != w.Window ||
			g.Calendar != w.Calendar || g.OnStoreError != w.OnStoreError {
			t.Errorf("limit %d: got %+v, want %+v", i, g, w)
		}
	}
	if a := s.Identity.Attributes; len(a) != 4 || a[3].Name != "user" || a[3].Header != "x-user-id" {
		t.Errorf("identity: got %+v, want user from header x-user-id (lower-cased)", a)
	}
}

func TestParseConfigSettlement(t *testing.T) {
	tests := []struct {
		name          string
		config        string
		wantReasoning []string // nil: the built-in list
		wantRefuse    bool
		wantAzure     map[string]string
	}{
		{"defaults", "", nil, false, nil},
		{"no hidden reasoning", "settlement: {hidden_reasoning_models: []}\n", []string{}, false, nil},
		{"own list, refuse background", "settlement: {hidden_reasoning_models: [my-reasoner*], background: refuse}\n", []string{"my-reasoner*"}, true, nil},
		{"azure", "azure: {deployments: {prod-4o: gpt-4o}}\n", nil, false, map[string]string{"prod-4o": "gpt-4o"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseConfig([]byte(baseConfig + tt.config))
			if err != nil {
				t.Fatal(err)
			}
			if (s.HiddenReasoning == nil) != (tt.wantReasoning == nil) || strings.Join(s.HiddenReasoning, ",") != strings.Join(tt.wantReasoning, ",") {
				t.Errorf("hidden reasoning: got %#v, want %#v", s.HiddenReasoning, tt.wantReasoning)
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

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string // the field the error must name
	}{
		{"unknown top-level field", "lisen: 1.2.3.4:5\n", "lisen"},
		{"unknown limit field", baseConfig + "limits:\n  - {name: a, dimension: tokens, limit: 1, window: 1m, windw: 1m}\n", "windw"},
		{"bad listen", "listen: nowhere\n", "listen"},
		{"bad store type", "store: {type: etcd}\n", "store.type"},
		{"bad background", "settlement: {background: sometimes}\n", "settlement.background"},
		{"empty reasoning pattern", "settlement: {hidden_reasoning_models: ['o1*', '']}\n", "settlement.hidden_reasoning_models[1]"},
		{"azure deployment without a model", "azure: {deployments: {prod: ''}}\n", "azure.deployments.prod"},
		{"redis without url", "store: {type: redis}\n", "store.redis.url"},
		{"redis bad url", "store: {type: redis, redis: {url: 'http://x'}}\n", "store.redis.url"},
		{"cluster without hash tag", "store: {type: redis, redis: {cluster_addrs: ['127.0.0.1:7000']}}\n", "store.redis.hash_tag"},
		{"redis bad timeout", "store: {type: redis, redis: {url: 'redis://x', timeout: fast}}\n", "store.redis.timeout"},
		{"attribute with two sources", "identity: {attributes: {t: {header: x, metadata: {namespace: n, key: k}}}}\n", "identity.attributes.t"},
		{"attribute without source", "identity: {attributes: {t: {}}}\n", "identity.attributes.t"},
		{"reserved attribute", "identity: {attributes: {model: {header: x-model}}}\n", "identity.attributes.model"},
		{"bad header name", "identity: {attributes: {t: {header: 'x y'}}}\n", "identity.attributes.t.header"},
		{"required unknown", "identity: {attributes: {t: {header: x}}, required: [tenant]}\n", "identity.required[0]"},
		{"bad tokenizer", "estimation: {tokenizer: magic}\n", "estimation.tokenizer"},
		{"bad chars per token", "estimation: {chars_per_token: -1}\n", "estimation.chars_per_token"},
		{"per-model rule without pattern", "estimation: {per_model: [{tokenizer: exact}]}\n", "estimation.per_model[0].pattern"},
		{"per-model bad tokenizer", "estimation: {per_model: [{pattern: 'gpt-*', tokenizer: magic}]}\n", "per_model[0].tokenizer"},
		{"half an image size", "estimation: {default_image: {width: 512}}\n", "default_image"},
		{"bad output cap", "estimation: {default_output_cap: -5}\n", "estimation.default_output_cap"},
		{"negative price", "models: {m: {input: -1}}\n", "models.m.input"},
		{"bad limit name", baseConfig + "limits:\n  - {name: 'a b', dimension: tokens, limit: 1, window: 1m}\n", "limits[0].name"},
		{"duplicate limit name", baseConfig + "limits:\n  - {name: a, dimension: tokens, limit: 1, window: 1m}\n  - {name: a, dimension: tokens, limit: 1, window: 1m}\n", "limits[1].name"},
		{"unknown dimension", baseConfig + "limits:\n  - {name: a, dimension: dollars, limit: 1, window: 1m}\n", "limits[0].dimension"},
		{"unknown algorithm", baseConfig + "limits:\n  - {name: a, dimension: tokens, algorithm: leaky, limit: 1, window: 1m}\n", "limits[0].algorithm"},
		{"negative limit", baseConfig + "limits:\n  - {name: a, dimension: tokens, limit: -5, window: 1m}\n", "limits[0].limit"},
		{"zero limit", baseConfig + "limits:\n  - {name: a, dimension: tokens, limit: 0, window: 1m}\n", "limits[0].limit"},
		{"fractional token limit", baseConfig + "limits:\n  - {name: a, dimension: tokens, limit: 1.5, window: 1m}\n", "limits[0].limit"},
		{"bad window", baseConfig + "limits:\n  - {name: a, dimension: tokens, limit: 1, window: soon}\n", "limits[0].window"},
		{"window too short", baseConfig + "limits:\n  - {name: a, dimension: tokens, limit: 1, window: 10ms}\n", "limits[0].window"},
		{"window too long", baseConfig + "limits:\n  - {name: a, dimension: tokens, limit: 1, window: 32d}\n", "limits[0].window"},
		{"no window", baseConfig + "limits:\n  - {name: a, dimension: tokens, limit: 1}\n", "limits[0].window"},
		{"month on sliding", baseConfig + "limits:\n  - {name: a, dimension: tokens, limit: 1, window: month}\n", "limits[0].window"},
		{"burst on fixed", baseConfig + "limits:\n  - {name: a, dimension: tokens, algorithm: fixed_window, limit: 1, burst: 2, window: 1m}\n", "limits[0].burst"},
		{"scope without source", baseConfig + "limits:\n  - {name: a, dimension: tokens, scope: [team], limit: 1, window: 1m}\n", "limits[0].scope[0]"},
		{"scope twice", baseConfig + "limits:\n  - {name: a, dimension: tokens, scope: [tenant, tenant], limit: 1, window: 1m}\n", "limits[0].scope[1]"},
		{"match without source", baseConfig + "limits:\n  - {name: a, dimension: tokens, match: {team: x}, limit: 1, window: 1m}\n", "limits[0].match.team"},
		{"bad on_store_error", baseConfig + "limits:\n  - {name: a, dimension: tokens, limit: 1, window: 1m, on_store_error: maybe}\n", "limits[0].on_store_error"},
		{"cost without prices", "limits:\n  - {name: a, dimension: cost, limit: 1, window: 1m}\n", "limits[0]"},
		{"cost without default", "models: {gpt-4o: {input: 1, output: 2}}\nlimits:\n  - {name: a, dimension: cost, limit: 1, window: 1m}\n", "limits[0]"},
		{"bad log level", "log: {level: loud}\n", "log.level"},
		{"empty", "", "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.config))
			if err == nil {
				t.Fatalf("ParseConfig accepted it, want an error naming %s", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
		})
	}
}

func TestCostLimitForOneModelNeedsOnlyItsPrice(t *testing.T) {
	_, err := ParseConfig([]byte("models: {gpt-4o: {input: 1, output: 2}}\nlimits:\n  - {name: a, dimension: cost, match: {model: gpt-4o}, limit: 1, window: 1m}\n"))
	if err != nil {
		t.Errorf("ParseConfig: %v", err)
	}
}

func TestEmbeddedDefaultConfigIsValid(t *testing.T) {
	s, err := ParseConfig(defaultConfig)
	if err != nil {
		t.Fatalf("embedded default: %v", err)
	}
	if s.Store.Type != "memory" || s.Listen != "127.0.0.1:50051" || s.Admin != "127.0.0.1:9090" || len(s.Limits) == 0 {
		t.Errorf("embedded default: got store %s listen %s admin %s, %d limits", s.Store.Type, s.Listen, s.Admin, len(s.Limits))
	}
}

func TestShippedConfigsAreValid(t *testing.T) {
	// Every tokenwarden config shipped with the project must load.
	paths, _ := filepath.Glob("../../envoy/*/tokenwarden*.yaml")
	if len(paths) == 0 {
		t.Fatal("no shipped tokenwarden config found under envoy/")
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, err := ParseConfig(data); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

// TestParseConfigAllowEviction: allow_eviction is off unless the file
// turns it on (the zero value is the safe default).
func TestParseConfigAllowEviction(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   bool
	}{
		{"unset", "store: {type: redis, redis: {url: 'redis://127.0.0.1:6379/0'}}\n", false},
		{"false", "store: {type: redis, redis: {url: 'redis://127.0.0.1:6379/0', allow_eviction: false}}\n", false},
		{"true", "store: {type: redis, redis: {url: 'redis://127.0.0.1:6379/0', allow_eviction: true}}\n", true},
		{"memory store", "store: {type: memory}\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseConfig([]byte(tt.config))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if s.Store.AllowEviction != tt.want {
				t.Errorf("AllowEviction: got %v, want %v", s.Store.AllowEviction, tt.want)
			}
			// check-config shows an operator that the check is off.
			var out strings.Builder
			printSettings(&out, s)
			if got := strings.Contains(out.String(), "allow_eviction"); got != tt.want {
				t.Errorf("check-config mentions allow_eviction: got %v, want %v:\n%s", got, tt.want, out.String())
			}
		})
	}
}
