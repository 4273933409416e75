package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// The log messages the eviction check writes.
const (
	msgUncheckedAllowed = "Redis eviction policy not checked: store.redis.allow_eviction is true"
	msgUncheckedDown    = "Redis eviction policy not checked: Redis did not answer; starting anyway"
	msgEvicting         = "Redis may evict counters: /readyz reports not ready"
	msgSafeAgain        = "Redis no longer evicts: every master has maxmemory-policy noeviction"
)

// evictionConfig is a server config on the Redis at url. The store timeout
// is generous so that a loaded machine does not fail /readyz's PING.
func evictionConfig(url string, allow bool) string {
	return fmt.Sprintf(`
log: {level: info}
shutdown_grace: 200ms
store:
  type: redis
  redis: {url: %q, timeout: 5s, allow_eviction: %v}
identity:
  attributes:
    tenant: {header: x-tenant-id}
  required: [tenant]
limits:
  - {name: tenant-tokens, dimension: tokens, scope: [tenant], algorithm: fixed_window, limit: 1000, window: 1h}
`, url, allow)
}

// TestStartRefusesEvictingRedis: on a Redis whose maxmemory-policy may
// evict counters, the server does not start, and says which field allows
// it and what to change.
func TestStartRefusesEvictingRedis(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl"} {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "100mb", "--maxmemory-policy", policy))
			path := filepath.Join(t.TempDir(), "tokenwarden.yaml")
			if err := os.WriteFile(path, []byte(evictionConfig(srv.URL(), false)), 0o600); err != nil {
				t.Fatal(err)
			}
			// Should the server start after all, run would serve until
			// this context ends, and return nil.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := run(ctx, []string{"-config", path, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0"}, strings.NewReader(""), io.Discard, io.Discard)
			if err == nil {
				t.Fatal("the server started on an evicting Redis")
			}
			for _, want := range []string{"store.redis.allow_eviction", srv.Addr(), "maxmemory-policy " + policy, "set maxmemory-policy noeviction"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestStartAllowEviction: with allow_eviction the same Redis is accepted,
// /readyz reports ready, and the risk is logged once, at start.
func TestStartAllowEviction(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"))
	r := start(t, evictionConfig(srv.URL(), true))
	for range 3 {
		if code, body := get(t, "http://"+r.adminAddr+"/readyz"); code != 200 {
			t.Errorf("/readyz: got %d %s, want 200", code, body)
		}
	}
	if n := r.logs.count(msgUncheckedAllowed); n != 1 {
		t.Errorf("%q logged %d times, want once", msgUncheckedAllowed, n)
	}
	if n := r.logs.count(msgEvicting); n != 0 {
		t.Errorf("%q logged %d times, want never with allow_eviction", msgEvicting, n)
	}
	r.stop(t)
}

// TestReadyzEviction: /readyz reads the policy on every probe, so a
// CONFIG SET made while the server runs shows on the next probe, both
// ways; the change is logged once, not on every probe.
func TestReadyzEviction(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "100mb"))
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	setPolicy := func(policy string) {
		t.Helper()
		if err := admin.ConfigSet(t.Context(), "maxmemory-policy", policy).Err(); err != nil {
			t.Fatalf("CONFIG SET maxmemory-policy %s: %v", policy, err)
		}
	}
	r := start(t, evictionConfig(srv.URL(), false))
	readyz := "http://" + r.adminAddr + "/readyz"
	if code, body := get(t, readyz); code != 200 {
		t.Fatalf("/readyz on noeviction: got %d %s, want 200", code, body)
	}

	setPolicy("volatile-lru")
	for range 2 {
		code, body := get(t, readyz)
		if code != 503 {
			t.Fatalf("/readyz on volatile-lru: got %d %s, want 503", code, body)
		}
		for _, want := range []string{"store unsafe", srv.Addr() + " has maxmemory-policy volatile-lru", "store.redis.allow_eviction: true"} {
			if !strings.Contains(body, want) {
				t.Errorf("/readyz body %q does not say %q", body, want)
			}
		}
	}
	if n := r.logs.count(msgEvicting); n != 1 {
		t.Errorf("%q logged %d times over two probes, want once", msgEvicting, n)
	}

	setPolicy("noeviction")
	if code, body := get(t, readyz); code != 200 {
		t.Errorf("/readyz on noeviction again: got %d %s, want 200", code, body)
	}
	if n := r.logs.count(msgSafeAgain); n != 1 {
		t.Errorf("%q logged %d times, want once", msgSafeAgain, n)
	}
	r.stop(t)
}

// TestStartWhileRedisDown: a Redis that does not answer at start is no
// reason to refuse (limits follow on_store_error meanwhile); the server
// starts with a warning, and /readyz finds the evicting policy once Redis
// is back.
func TestStartWhileRedisDown(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lfu"))
	srv.Kill()
	r := start(t, evictionConfig(srv.URL(), false))
	if n := r.logs.count(msgUncheckedDown); n != 1 {
		t.Errorf("%q logged %d times, want once", msgUncheckedDown, n)
	}
	readyz := "http://" + r.adminAddr + "/readyz"
	if code, body := get(t, readyz); code != 503 || !strings.Contains(body, "store unreachable") {
		t.Errorf("/readyz with Redis down: got %d %s, want 503 store unreachable", code, body)
	}

	srv.Restart()
	// The client redials on the next call; give it a few probes.
	var code int
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, body = get(t, readyz); !strings.Contains(body, "store unreachable") {
			break
		}
	}
	if code != 503 || !strings.Contains(body, "maxmemory-policy allkeys-lfu") {
		t.Errorf("/readyz with Redis back on allkeys-lfu: got %d %s, want 503 naming the policy", code, body)
	}
	r.stop(t)
}
