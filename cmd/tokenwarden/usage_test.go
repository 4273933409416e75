package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
	"github.com/tokenwarden/tokenwarden/config"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

const usageConfig = `
identity:
  attributes:
    tenant: {header: x-tenant-id}
    user:   {header: x-user-id}
    run:    {header: x-run-id}
  required: [tenant]
models:
  default: {input: 1.00, output: 2.00}
limits:
  - {name: tenant-rpm, dimension: requests, scope: [tenant], limit: 100, window: 1m}
  - {name: user-tpm, dimension: tokens, scope: [tenant, user], algorithm: fixed_window, limit: 1000, window: 1h}
  - {name: monthly, dimension: cost, scope: [tenant], algorithm: fixed_window, limit: 5.00, window: month}
  - {name: global, dimension: requests, algorithm: token_bucket, limit: 600, burst: 50, window: 1m}
  - {name: parallel, dimension: concurrent, scope: [tenant, user], limit: 4, lease: 10m}
  - {name: run, dimension: requests, scope: [run], algorithm: lifetime, limit: 50, max_duration: 2h}
`

// usageFixture is a usage API on store, whose limiter has charged
// tenant acme's users u1 (100 tokens) and u2 (300 tokens).
type usageFixture struct {
	handler http.Handler
	api     *usageAPI
	logs    *bytes.Buffer
	reg     *prometheus.Registry

	mu      sync.Mutex
	cfg     *config.Config
	limiter *accounting.Limiter
}

// state is the usage API's view of the config in force.
func (f *usageFixture) state() (*config.Config, *accounting.Limiter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg, f.limiter
}

// edit changes the config in force, as a reload would (the limits stay).
func (f *usageFixture) edit(change func(*config.Config)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := *f.cfg
	change(&next)
	f.cfg = &next
}

func newUsageFixture(t *testing.T, store accounting.Store, token string) *usageFixture {
	t.Helper()
	cfg, err := config.Parse([]byte(usageConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.AdminToken = token
	logs := &bytes.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	reg := prometheus.NewRegistry()
	_, limiter, err := newServer(cfg, store, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = limiter.Close(t.Context()) })
	for user, in := range map[string]int64{"u1": 100, "u2": 300} {
		r, err := limiter.Reserve(t.Context(), accounting.Request{
			Attributes: accounting.Attributes{{Name: "tenant", Value: "acme"}, {Name: "user", Value: user}, {Name: "model", Value: "m"}},
			Model:      "m", Estimate: accounting.Estimate{InputTokens: in},
		})
		if err != nil || !r.Admitted {
			t.Fatalf("reserve for %s: %v", user, err)
		}
	}
	f := &usageFixture{logs: logs, reg: reg, cfg: cfg, limiter: limiter}
	f.api = newUsageAPI(f.state, log, reg)
	f.api.now = func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }
	ready := &readiness{store: store, log: log}
	f.handler = withUsageAPI(adminHandler(reg, ready, false), f.api)
	return f
}

// do serves one request and decodes the JSON answer.
func (f *usageFixture) do(t *testing.T, method, target, body string, header ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.RemoteAddr, req.Host = "127.0.0.1:40000", "localhost:9090"
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	var m map[string]any
	if strings.HasPrefix(target, "/v1/") {
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: content-type %q, want application/json", method, target, ct)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("%s %s: %d, not JSON: %v\n%s", method, target, rec.Code, err, rec.Body)
		}
	}
	return rec.Code, rec.Header(), m
}

// path reads a value out of decoded JSON: "limits.1.used".
func path(v any, p string) any {
	for _, k := range strings.Split(p, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i := 0
			for _, c := range k {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

type usageCase struct {
	name   string
	method string
	target string
	body   string
	status int
	// want maps paths of the answer to their values (JSON numbers are
	// float64).
	want map[string]any
	// wantIn: the error message (error.message) contains it.
	wantIn string
}

var usageCases = []usageCase{
	{"usage of a user", "GET", "/v1/usage?tenant=acme&user=u1", "", 200, map[string]any{
		"attributes.tenant": "acme", "attributes.user": "u1",
		"limits.0.name": "tenant-rpm", "limits.0.used": 2.0, "limits.0.remaining": 98.0, "limits.0.scope_values.tenant": "acme", "limits.0.window": "1m", "limits.0.algorithm": "sliding_window",
		"limits.1.name": "user-tpm", "limits.1.used": 100.0, "limits.1.remaining": 900.0, "limits.1.scope_values.user": "u1",
		"limits.2.name": "monthly", "limits.2.unit": "micro_usd", "limits.2.used": 400.0, "limits.2.limit": 5e6, "limits.2.window": "month",
		"limits.3.name": "global", "limits.3.used": 2.0, "limits.3.limit": 50.0, "limits.3.refill_per_window": 600.0,
		// u1's reservation is not settled: it holds its lease.
		"limits.4.name": "parallel", "limits.4.used": 1.0, "limits.4.remaining": 3.0, "limits.4.lease": "10m", "limits.4.window": nil,
		"limits.5": nil,
	}, ""},
	{"usage of a tenant", "GET", "/v1/usage?tenant=acme", "", 200, map[string]any{
		"limits.0.name": "tenant-rpm", "limits.1.name": "monthly", "limits.2.name": "global", "limits.3": nil,
	}, ""},
	{"usage of a run", "GET", "/v1/usage?tenant=acme&run=r1", "", 200, map[string]any{
		"limits.3.name": "run", "limits.3.used": 0.0, "limits.3.remaining": 50.0, "limits.3.max_duration": "2h", "limits.3.algorithm": "lifetime", "limits.4": nil,
	}, ""},
	{"model by family", "GET", "/v1/usage?tenant=acme&model=gpt-4o-2024-08-06", "", 200, map[string]any{"attributes.model": "gpt-4o-2024-08-06", "limits.0.used": 2.0}, ""},
	{"unknown attribute", "GET", "/v1/usage?tenant=acme&colour=red", "", 400, map[string]any{"error.code": "bad_request"}, `unknown attribute "colour" (known: api, model, run, tenant, user)`},
	{"attribute twice", "GET", "/v1/usage?tenant=a&tenant=b", "", 400, nil, `"tenant" is given 2 times`},
	{"malformed query", "GET", "/v1/usage?tenant=%zz", "", 400, nil, "malformed query"},
	{"usage wants GET", "POST", "/v1/usage?tenant=acme", "", 405, map[string]any{"error.code": "method_not_allowed"}, "use GET"},

	{"one counter", "GET", "/v1/limits/user-tpm/usage?tenant=acme&user=u2", "", 200, map[string]any{"name": "user-tpm", "used": 300.0, "remaining": 700.0, "scope_values.user": "u2", "limit": 1000.0}, ""},
	{"one counter never charged", "GET", "/v1/limits/user-tpm/usage?tenant=acme&user=u9", "", 200, map[string]any{"used": 0.0, "remaining": 1000.0}, ""},
	{"the global counter", "GET", "/v1/limits/global/usage", "", 200, map[string]any{"used": 2.0, "remaining": 48.0}, ""},
	{"scope value missing", "GET", "/v1/limits/user-tpm/usage?tenant=acme", "", 400, nil, `limit "user-tpm" is per tenant+user; give user`},
	{"not in the scope", "GET", "/v1/limits/tenant-rpm/usage?tenant=acme&user=u1", "", 400, nil, `"user" is not part of its scope`},
	{"unknown limit", "GET", "/v1/limits/nope/usage?tenant=acme", "", 404, map[string]any{"error.code": "unknown_limit"}, `no limit is named "nope"`},

	{"top", "GET", "/v1/limits/user-tpm/top?n=1", "", 200, map[string]any{
		"limit.name": "user-tpm", "counters.0.scope_values.user": "u2", "counters.0.used": 300.0, "counters.1": nil, "complete": true, "scanned": 2.0,
	}, ""},
	{"top by default", "GET", "/v1/limits/user-tpm/top", "", 200, map[string]any{"counters.0.used": 300.0, "counters.1.used": 100.0, "counters.2": nil}, ""},
	{"top with a scan bound", "GET", "/v1/limits/user-tpm/top?n=100&scan=100000", "", 200, map[string]any{"complete": true}, ""},
	{"n zero", "GET", "/v1/limits/user-tpm/top?n=0", "", 400, nil, "n must be one whole number from 1 to 100"},
	{"n too large", "GET", "/v1/limits/user-tpm/top?n=101", "", 400, nil, "from 1 to 100"},
	{"n not a number", "GET", "/v1/limits/user-tpm/top?n=ten", "", 400, nil, "from 1 to 100"},
	{"scan too large", "GET", "/v1/limits/user-tpm/top?scan=100001", "", 400, nil, "scan must be one whole number from 1 to 100000"},
	{"top unknown parameter", "GET", "/v1/limits/user-tpm/top?tenant=acme", "", 400, nil, `unknown parameter "tenant"`},
	{"top of an unknown limit", "GET", "/v1/limits/nope/top", "", 404, nil, "nope"},
	{"top wants GET", "DELETE", "/v1/limits/user-tpm/top", "", 405, nil, "use GET"},

	{"reset wants POST", "GET", "/v1/limits/user-tpm/reset", "", 405, nil, "use POST"},
	{"reset without a body", "POST", "/v1/limits/user-tpm/reset", "", 400, nil, "must be a JSON object"},
	{"reset with an unknown field", "POST", "/v1/limits/user-tpm/reset", `{"scope":{"tenant":"acme","user":"u1"},"who":"me"}`, 400, nil, `unknown field "who"`},
	{"reset with two objects", "POST", "/v1/limits/user-tpm/reset", `{"scope":{"tenant":"acme","user":"u1"}} {}`, 400, nil, "one JSON object"},
	{"reset with a value not a string", "POST", "/v1/limits/user-tpm/reset", `{"scope":{"tenant":1,"user":"u1"}}`, 400, nil, "must be a JSON object"},
	{"reset missing a scope value", "POST", "/v1/limits/user-tpm/reset", `{"scope":{"tenant":"acme"}}`, 400, nil, "give user"},
	{"reset with an attribute not in the scope", "POST", "/v1/limits/tenant-rpm/reset", `{"scope":{"tenant":"acme","user":"u1"}}`, 400, nil, "not part of its scope"},
	{"reset of an unknown limit", "POST", "/v1/limits/nope/reset", `{"scope":{}}`, 404, nil, "nope"},

	{"limits", "GET", "/v1/limits", "", 200, map[string]any{"limits.0.name": "tenant-rpm", "limits.1.scope.1": "user", "limits.3.scope": []any{}, "limits.4.name": "parallel", "limits.5.max_duration": "2h", "limits.6": nil}, ""},
	{"unknown endpoint", "GET", "/v1/nothing", "", 404, map[string]any{"error.code": "not_found"}, "/v1/nothing"},
}

func runUsageCases(t *testing.T, store accounting.Store) {
	f := newUsageFixture(t, store, "")
	for _, tc := range usageCases {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, m := f.do(t, tc.method, tc.target, tc.body)
			if code != tc.status {
				t.Fatalf("status: got %d, want %d: %v", code, tc.status, m)
			}
			for p, want := range tc.want {
				got := path(m, p)
				if gs, ws := jsonString(got), jsonString(want); gs != ws {
					t.Errorf("%s: got %s, want %s", p, gs, ws)
				}
			}
			if tc.wantIn != "" {
				if msg, _ := path(m, "error.message").(string); !strings.Contains(msg, tc.wantIn) {
					t.Errorf("error message: got %q, want it to contain %q", msg, tc.wantIn)
				}
			}
			if code == 405 && hdr.Get("Allow") == "" {
				t.Errorf("405 without an Allow header")
			}
		})
	}
	t.Run("reset", func(t *testing.T) { testReset(t, f) })
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// testReset: a reset starts the counter afresh, touches no other, says
// what it held, is logged at warn with who asked and is counted.
func testReset(t *testing.T, f *usageFixture) {
	code, _, m := f.do(t, "POST", "/v1/limits/user-tpm/reset", `{"scope":{"tenant":"acme","user":"u2"},"reason":"ticket 42"}`, operatorHeader, "alice")
	if code != 200 || path(m, "existed") != true || path(m, "before.used") != 300.0 || path(m, "scope_values.user") != "u2" {
		t.Fatalf("reset: got %d %v, want 200, existed, used 300 before", code, m)
	}
	if _, _, m := f.do(t, "GET", "/v1/limits/user-tpm/usage?tenant=acme&user=u2", ""); path(m, "used") != 0.0 {
		t.Errorf("after the reset: got used %v, want 0", path(m, "used"))
	}
	if _, _, m := f.do(t, "GET", "/v1/limits/user-tpm/usage?tenant=acme&user=u1", ""); path(m, "used") != 100.0 {
		t.Errorf("another user after the reset: got used %v, want 100", path(m, "used"))
	}
	if _, _, m := f.do(t, "POST", "/v1/limits/user-tpm/reset", `{"scope":{"tenant":"acme","user":"u2"}}`); path(m, "existed") != false {
		t.Errorf("second reset: got existed %v, want false", path(m, "existed"))
	}
	var entry map[string]any
	for line := range strings.SplitSeq(f.logs.String(), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil && e["msg"] == "counter reset" {
			entry = e
			break
		}
	}
	if entry == nil || entry["level"] != "WARN" || entry["operator"] != "alice" || entry["remote_addr"] != "127.0.0.1:40000" ||
		entry["limit"] != "user-tpm" || entry["reason"] != "ticket 42" || entry["used_before"] != 300.0 || path(entry, "scope.user") != "u2" {
		t.Errorf("reset log: got %v, want a warning naming the limit, scope, operator, address and reason", entry)
	}
	var got dto.Metric
	if err := f.api.resets.WithLabelValues("user-tpm").Write(&got); err != nil || got.GetCounter().GetValue() != 2 {
		t.Errorf("tokenwarden_admin_resets_total{limit=user-tpm}: got %v (%v), want 2", got.GetCounter().GetValue(), err)
	}
}

func TestUsageAPIMemory(t *testing.T) {
	runUsageCases(t, memstore.New(memstore.Options{}))
}

// TestUsageAPIFollowsReload: a reload's limits, identity attributes and
// admin token apply to the usage API's next request, as they do to the
// next stream: rotating the token is a SIGHUP.
func TestUsageAPIFollowsReload(t *testing.T) {
	rig := newReloadRig(t, baseConfig)
	api := newUsageAPI(rig.r.state, slog.New(slog.DiscardHandler), nil)
	h := withUsageAPI(http.NotFoundHandler(), api)
	get := func(target string, header ...string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest("GET", "http://localhost:9090"+target, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var m map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &m)
		return rec.Code, m
	}
	if got := rig.limitInForce(t); got != "1000" {
		t.Fatalf("limit before the reload: %s", got)
	}
	if code, m := get("/v1/usage?tenant=acme"); code != 200 || path(m, "limits.0.limit") != 1000.0 || path(m, "limits.0.used") != 12.0 || path(m, "limits.1") != nil {
		t.Fatalf("before the reload: got %d %v, want tpm, limit 1000, used 12", code, m)
	}

	const token = "0123456789abcdef0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	next := strings.Replace(baseConfig, "limit: 1000", "limit: 2000", 1) +
		"  - {name: rpm, dimension: requests, scope: [tenant], limit: 10, window: 1m}\n" +
		"admin_token_file: " + tokenFile + "\n"
	if live, restart := configChanges(parseConfig(t, baseConfig), parseConfig(t, next)); !slices.Contains(live, "admin_token_file") || len(restart) != 0 {
		t.Errorf("changes: got live %q, restart %q, want admin_token_file live", live, restart)
	}
	rig.write(t, next)
	if got := rig.r.check(); got != reloadApplied {
		t.Fatalf("reload: got %q, want applied", got)
	}
	if code, _ := get("/v1/usage?tenant=acme"); code != 401 {
		t.Errorf("after a reload that set a token, without it: got %d, want 401", code)
	}
	code, m := get("/v1/usage?tenant=acme", "Authorization", "Bearer "+token)
	if code != 200 || path(m, "limits.0.limit") != 2000.0 || path(m, "limits.0.used") != 12.0 || path(m, "limits.1.name") != "rpm" {
		t.Errorf("after the reload: got %d %v, want tpm at 2000 (used 12) and rpm", code, m)
	}
	if code, _ := get("/v1/limits/rpm/top", "Authorization", "Bearer "+token); code != 200 {
		t.Errorf("top of the new limit: got %d, want 200", code)
	}
}

// TestUsageAPILimitFrom: a limit whose value comes from an attribute is
// shown at the value a query gives, and says where its value comes from.
func TestUsageAPILimitFrom(t *testing.T) {
	cfg, err := config.Parse([]byte(`
identity:
  attributes:
    tenant: {header: x-tenant-id}
    tpm:    {header: x-tpm}
limits:
  - {name: tpm, dimension: tokens, scope: [tenant], algorithm: fixed_window, limit: 1000, window: 1h, limit_from: {attribute: tpm, ceiling: 10000}}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, limiter, err := newServer(cfg, memstore.New(memstore.Options{}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = limiter.Close(t.Context()) })
	r, err := limiter.Reserve(t.Context(), accounting.Request{
		Attributes: accounting.Attributes{{Name: "tenant", Value: "acme"}, {Name: "tpm", Value: "5000"}},
		Estimate:   accounting.Estimate{InputTokens: 800},
	})
	if err != nil || !r.Admitted {
		t.Fatalf("reserve: %v", err)
	}
	api := newUsageAPI(func() (*config.Config, *accounting.Limiter) { return cfg, limiter }, slog.New(slog.DiscardHandler), nil)
	h := withUsageAPI(http.NotFoundHandler(), api)
	for _, tc := range []struct {
		target        string
		status        int
		limit, remain float64
	}{
		{"/v1/usage?tenant=acme&tpm=5000", 200, 5000, 4200},
		{"/v1/usage?tenant=acme", 200, 1000, 200},
		{"/v1/limits/tpm/usage?tenant=acme&tpm=5000", 200, 5000, 4200},
		{"/v1/limits/tpm/usage?tenant=acme", 200, 1000, 200},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost:9090"+tc.target, nil))
		var m map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &m)
		one := m
		if strings.HasPrefix(tc.target, "/v1/usage") {
			one, _ = path(m, "limits.0").(map[string]any)
		}
		if rec.Code != tc.status || path(one, "limit") != tc.limit || path(one, "remaining") != tc.remain ||
			path(one, "limit_from.attribute") != "tpm" || path(one, "limit_from.ceiling") != 10000.0 {
			t.Errorf("%s: got %d %s, want limit %v remaining %v from attribute tpm", tc.target, rec.Code, rec.Body, tc.limit, tc.remain)
		}
	}
	// A reset names the counter by its scope alone.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "http://localhost:9090/v1/limits/tpm/reset", strings.NewReader(`{"scope":{"tenant":"acme","tpm":"5000"}}`)))
	if rec.Code != 400 {
		t.Errorf("reset with the value attribute: got %d %s, want 400", rec.Code, rec.Body)
	}
}

// TestUsageAPIResetTimes: on a store whose clock agrees with the
// replica's, reset_at is the window's end.
func TestUsageAPIResetTimes(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := newUsageFixture(t, memstore.New(memstore.Options{Now: func() time.Time { return at.Add(15 * time.Minute) }}), "")
	f.api.now = func() time.Time { return at.Add(15 * time.Minute) }
	_, _, m := f.do(t, "GET", "/v1/limits/user-tpm/usage?tenant=acme&user=u1", "")
	if path(m, "reset_seconds") != 2700.0 || path(m, "reset_at") != "2026-12-01T13:00:00Z" {
		t.Errorf("fixed hour window: got reset %v s at %v, want 2700 s at 13:00", path(m, "reset_seconds"), path(m, "reset_at"))
	}
	_, _, m = f.do(t, "GET", "/v1/limits/monthly/usage?tenant=acme", "")
	if path(m, "reset_at") != "2027-01-01T00:00:00Z" {
		t.Errorf("calendar month: got reset at %v, want 2027-01-01T00:00:00Z", path(m, "reset_at"))
	}
}

func TestUsageAPIRedis(t *testing.T) {
	srv := redistest.Start(t)
	store, err := redisstore.New(redisstore.Options{URL: srv.URL(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	runUsageCases(t, store)
}

func TestUsageAPIToken(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	f := newUsageFixture(t, memstore.New(memstore.Options{}), token)
	tests := []struct {
		name   string
		header []string
		status int
	}{
		{"no header", nil, 401},
		{"wrong token", []string{"Authorization", "Bearer 0123456789abcdef0123456789abcdeX"}, 401},
		{"a prefix of the token", []string{"Authorization", "Bearer 0123456789abcdef"}, 401},
		{"another scheme", []string{"Authorization", "Basic " + token}, 401},
		{"the token alone", []string{"Authorization", token}, 401},
		{"right token", []string{"Authorization", "Bearer " + token}, 200},
		{"scheme in lower case", []string{"Authorization", "bearer " + token}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, target := range []string{"/v1/usage?tenant=acme", "/v1/limits/user-tpm/top", "/v1/limits"} {
				code, hdr, m := f.do(t, "GET", target, "", tt.header...)
				if code != tt.status {
					t.Errorf("%s: got %d %v, want %d", target, code, m, tt.status)
				}
				if code == 401 && (hdr.Get("WWW-Authenticate") == "" || path(m, "error.code") != "unauthorized") {
					t.Errorf("%s: 401 without WWW-Authenticate or error code: %v %v", target, hdr, m)
				}
			}
		})
	}
	// A reset without the token changes nothing.
	if code, _, _ := f.do(t, "POST", "/v1/limits/user-tpm/reset", `{"scope":{"tenant":"acme","user":"u2"}}`); code != 401 {
		t.Errorf("reset without the token: got %d, want 401", code)
	}
	if u, _ := f.limiter.CounterUsage(t.Context(), "user-tpm", accounting.Attributes{{Name: "tenant", Value: "acme"}, {Name: "user", Value: "u2"}}); u.Used != 300 {
		t.Errorf("after a refused reset: used %d, want 300", u.Used)
	}
	// Metrics and health stay open.
	for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
		if code, _, _ := f.do(t, "GET", p, ""); code != 200 {
			t.Errorf("%s without a token: got %d, want 200", p, code)
		}
	}
}

// TestUsageAPITopOneAtATime: a second top scan while one runs is refused
// rather than queued, so that no one can pile scans onto the store.
func TestUsageAPITopOneAtATime(t *testing.T) {
	f := newUsageFixture(t, memstore.New(memstore.Options{}), "")
	f.api.topSlot <- struct{}{} // a scan in progress
	code, _, m := f.do(t, "GET", "/v1/limits/user-tpm/top", "")
	if code != 429 || path(m, "error.code") != "busy" {
		t.Errorf("while a scan runs: got %d %v, want 429 busy", code, m)
	}
	<-f.api.topSlot
	if code, _, _ := f.do(t, "GET", "/v1/limits/user-tpm/top", ""); code != 200 {
		t.Errorf("after it: got %d, want 200", code)
	}
}

// bareStore is a Store without the read side.
type bareStore struct{ accounting.Store }

func TestUsageAPIWithoutInspector(t *testing.T) {
	f := newUsageFixture(t, bareStore{memstore.New(memstore.Options{})}, "")
	if code, _, m := f.do(t, "GET", "/v1/usage?tenant=acme", ""); code != 501 || path(m, "error.code") != "not_implemented" {
		t.Errorf("got %d %v, want 501 not_implemented", code, m)
	}
}

func TestPrintAdminAPI(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, config, want string }{
		{"loopback", "limits: []\n", "usage API (/v1/ on the admin port): no token; loopback only"},
		{"exposed", "admin: 0.0.0.0:9090\nlimits: []\n", "no token, so it answers loopback clients only although admin 0.0.0.0:9090 is reachable beyond loopback"},
		{"token", "admin: 0.0.0.0:9090\nadmin_token_file: " + file + "\nlimits: []\n", "bearer token from " + file},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := printed(t, tt.config)
			if !strings.Contains(out.String(), tt.want) || strings.Contains(out.String(), token) {
				t.Errorf("got:\n%s\nwant a line with %q, and never the token", out.String(), tt.want)
			}
		})
	}
}

// TestUsageAPILoopbackOnly: on an admin address beyond loopback and
// without a token, the usage API answers loopback peers (kubectl
// port-forward) and refuses the rest; metrics stay open to all.
func TestUsageAPILoopbackOnly(t *testing.T) {
	f := newUsageFixture(t, memstore.New(memstore.Options{}), "")
	f.edit(func(c *config.Config) { c.Admin = "0.0.0.0:9090" })
	tests := []struct {
		peer   string
		status int
	}{{"127.0.0.1:5000", 200}, {"[::1]:5000", 200}, {"10.1.2.3:5000", 403}, {"[2001:db8::1]:5000", 403}, {"garbage", 403}}
	for _, tt := range tests {
		for _, target := range []string{"/v1/usage?tenant=acme", "/v1/limits/user-tpm/reset"} {
			req := httptest.NewRequest("GET", "http://localhost:9090"+target, nil)
			req.RemoteAddr = tt.peer
			rec := httptest.NewRecorder()
			f.handler.ServeHTTP(rec, req)
			want := tt.status
			if want == 200 && strings.HasSuffix(target, "/reset") {
				want = 405 // past the peer check, a GET of reset
			}
			if rec.Code != want {
				t.Errorf("%s from %s: got %d, want %d", target, tt.peer, rec.Code, want)
			}
		}
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.RemoteAddr = tt.peer
		rec := httptest.NewRecorder()
		f.handler.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Errorf("/metrics from %s: got %d, want 200", tt.peer, rec.Code)
		}
	}
}

func TestConfigWindow(t *testing.T) {
	tests := []struct {
		name  string
		limit accounting.Limit
		want  string
	}{
		{"month", accounting.Limit{Calendar: accounting.CalendarMonth}, "month"},
		{"a calendar day in a zone", accounting.Limit{Calendar: accounting.CalendarDay, Window: 24 * time.Hour}, "day"},
		{"24 hours", accounting.Limit{Window: 24 * time.Hour}, "1d"},
		{"days", accounting.Limit{Window: 7 * 24 * time.Hour}, "7d"},
		{"hours", accounting.Limit{Window: 36 * time.Hour}, "36h"},
		{"minutes", accounting.Limit{Window: 90 * time.Minute}, "90m"},
		{"seconds", accounting.Limit{Window: 90 * time.Second}, "1m30s"},
	}
	for _, tt := range tests {
		if got := configWindow(&tt.limit); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestDescribeShadowAndZone: the usage API names a shadow limit's mode
// and a calendar window's time zone, as the config does, and says
// neither for an enforced limit on UTC.
func TestDescribeShadowAndZone(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name               string
		limit              accounting.Limit
		window, zone, mode string
	}{
		{"enforced, UTC", accounting.Limit{Algorithm: accounting.FixedWindow, Window: 24 * time.Hour}, "1d", "", ""},
		{"a day in Berlin", accounting.Limit{Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarDay, Window: 24 * time.Hour, Location: berlin}, "day", "Europe/Berlin", ""},
		{"a shadow month in Berlin", accounting.Limit{Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth, Location: berlin, Mode: accounting.Shadow}, "month", "Europe/Berlin", "shadow"},
		{"a shadow concurrent limit", accounting.Limit{Dimension: accounting.Concurrent, Algorithm: accounting.Leases, Window: 10 * time.Minute, Mode: accounting.Shadow}, "", "", "shadow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := describeLimit(&tt.limit)
			if j.Window != tt.window || j.TimeZone != tt.zone || j.Mode != tt.mode {
				t.Errorf("got window %q, time_zone %q, mode %q; want %q, %q, %q", j.Window, j.TimeZone, j.Mode, tt.window, tt.zone, tt.mode)
			}
		})
	}
}

func TestAdminExposed(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9090": false, "[::1]:9090": false, "localhost:9090": false,
		"0.0.0.0:9090": true, ":9090": true, "10.0.0.5:9090": true, "admin.internal:9090": true,
	} {
		if got := adminExposed(addr); got != want {
			t.Errorf("adminExposed(%q): got %v, want %v", addr, got, want)
		}
	}
}

// TestUsageAPIThroughTheBinary runs the server with a token file, sends
// a request through it, and reads and resets its counter on the admin
// listener.
func TestUsageAPIThroughTheBinary(t *testing.T) {
	const token = "fedcba9876543210fedcba9876543210"
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, testConfig+"admin_token_file: "+tokenFile+"\n")
	envoy := envoytest.Connect(t, r.grpcAddr)
	resp := envoy.Do(t.Context(), envoytest.Request{
		Path:    "/v1/chat/completions",
		Headers: [][2]string{{"x-tenant-id", "acme"}, {"content-type", "application/json"}},
		Body:    []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`),
	}, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "application/json"}},
			Chunks: [][]byte{[]byte(`{"usage":{"prompt_tokens":9,"completion_tokens":3}}`)}}
	})
	if resp.Status != 200 {
		t.Fatalf("request: got %d %s", resp.Status, resp.Body)
	}
	r.logs.await(t, "settled")

	call := func(method, p, body string, auth bool) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+r.adminAddr+p, strings.NewReader(body))
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set(operatorHeader, "bob")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return res.StatusCode, m
	}
	if code, _ := call("GET", "/v1/usage?tenant=acme", "", false); code != 401 {
		t.Errorf("usage without the token: got %d, want 401", code)
	}
	code, m := call("GET", "/v1/usage?tenant=acme", "", true)
	if code != 200 || path(m, "limits.0.name") != "tenant-tokens" || path(m, "limits.0.used") != 12.0 {
		t.Errorf("usage: got %d %v, want tenant-tokens used 12 (9+3, settled)", code, m)
	}
	code, m = call("POST", "/v1/limits/tenant-tokens/reset", `{"scope":{"tenant":"acme"}}`, true)
	if code != 200 || path(m, "existed") != true {
		t.Errorf("reset: got %d %v", code, m)
	}
	entry := r.logs.await(t, "counter reset")
	if entry["operator"] != "bob" || entry["limit"] != "tenant-tokens" {
		t.Errorf("reset log: got %v", entry)
	}
	if _, m := call("GET", "/v1/limits/tenant-tokens/usage?tenant=acme", "", true); path(m, "used") != 0.0 {
		t.Errorf("after the reset: got %v, want used 0", m)
	}
	if code, metrics := get(t, "http://"+r.adminAddr+"/metrics"); code != 200 || !strings.Contains(metrics, `tokenwarden_admin_resets_total{limit="tenant-tokens"} 1`) {
		t.Errorf("/metrics (open without the token) lacks the reset: %d", code)
	}
	r.stop(t)
}

// TestUsageAPIReserveFor: a limit's reserve is in its description, with
// what other requests are held to; the counter is shown against the
// whole limit.
func TestUsageAPIReserveFor(t *testing.T) {
	cfg, err := config.Parse([]byte(`
identity:
  attributes:
    priority: {header: x-priority}
limits:
  - {name: shared, dimension: tokens, algorithm: fixed_window, limit: 1000, window: 1h, reserve_for: {attribute: priority, value: interactive, share: 0.3}}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, limiter, err := newServer(cfg, memstore.New(memstore.Options{}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = limiter.Close(t.Context()) })
	if r, err := limiter.Reserve(t.Context(), accounting.Request{Estimate: accounting.Estimate{InputTokens: 600}}); err != nil || !r.Admitted {
		t.Fatalf("reserve: %v", err)
	}
	api := newUsageAPI(func() (*config.Config, *accounting.Limiter) { return cfg, limiter }, slog.New(slog.DiscardHandler), nil)
	rec := httptest.NewRecorder()
	withUsageAPI(http.NotFoundHandler(), api).ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost:9090/v1/usage", nil))
	var m map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	one, _ := path(m, "limits.0").(map[string]any)
	if rec.Code != 200 || path(one, "limit") != 1000.0 || path(one, "remaining") != 400.0 ||
		path(one, "reserve_for.attribute") != "priority" || path(one, "reserve_for.value") != "interactive" ||
		path(one, "reserve_for.share") != 0.3 || path(one, "reserve_for.others_limit") != 700.0 {
		t.Errorf("got %d %s, want limit 1000, remaining 400, reserve_for priority=interactive 0.3, others_limit 700", rec.Code, rec.Body)
	}
}

// TestUsageAPIAttributeDefaults: /v1/usage answers for the request the
// query describes, as the demo's config resolves it: a request without
// x-tier is tier free, so the free tier's limit is listed and the tier is
// named among the attributes; an empty value is no value, as in a
// request; a tier given explicitly is that tier.
func TestUsageAPIAttributeDefaults(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "envoy", "demo", "tokenwarden.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(memstore.Options{})
	log := slog.New(slog.DiscardHandler)
	_, limiter, err := newServer(cfg, store, log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = limiter.Close(t.Context()) })
	api := newUsageAPI(func() (*config.Config, *accounting.Limiter) { return cfg, limiter }, log, nil)
	h := withUsageAPI(http.NotFoundHandler(), api)
	tests := []struct {
		query    string
		tier     any // attributes.tier in the answer; nil: absent
		wantFree bool
	}{
		{"tenant=acme", "free", true},
		{"tenant=acme&tier=", "free", true},
		{"tenant=acme&tier=pro", "pro", false},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			req := httptest.NewRequest("GET", "http://localhost:9090/v1/usage?"+tt.query, nil)
			req.RemoteAddr = "127.0.0.1:40000"
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var m map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || rec.Code != 200 {
				t.Fatalf("got %d %s, want 200 and JSON", rec.Code, rec.Body)
			}
			if got := path(m, "attributes.tier"); got != tt.tier {
				t.Errorf("attributes.tier: got %v, want %v", got, tt.tier)
			}
			var names []string
			for i := 0; path(m, "limits."+strconv.Itoa(i)) != nil; i++ {
				names = append(names, path(m, "limits."+strconv.Itoa(i)+".name").(string))
			}
			if got := slices.Contains(names, "free-tenant-rpm"); got != tt.wantFree {
				t.Errorf("limits %v: free-tenant-rpm listed %v, want %v", names, got, tt.wantFree)
			}
		})
	}
}
