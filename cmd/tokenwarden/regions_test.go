package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/internal/envoytest"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestRunLeasesAcrossRegions runs the binary with a regions section: a
// request under a limit kept across regions is admitted on a lease from
// the ledger, the lease shows in the metrics, and at shutdown the
// region gives back what it did not spend.
func TestRunLeasesAcrossRegions(t *testing.T) {
	ledger := redistest.Start(t)
	regional := redistest.Start(t)
	r := start(t, `
log: {level: debug}
shutdown_grace: 200ms
store: {type: redis, redis: {url: "`+regional.URL()+`", timeout: 1m}}
regions:
  name: eu
  ledger: {url: "`+ledger.URL()+`", timeout: 1m}
  lease_chunk: 0.01
  acquire_timeout: 1m   # a loaded machine must not make the first request's acquire time out
  grace: 2m             # past the store's timeout
limits:
  - {name: company, dimension: tokens, algorithm: fixed_window, limit: 100000, window: month, across_regions: true}
`)
	envoy := envoytest.Connect(t, r.grpcAddr)
	resp := envoy.Do(t.Context(), envoytest.Request{
		Path:    "/v1/chat/completions",
		Headers: [][2]string{{"content-type", "application/json"}},
		Body:    []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`),
	}, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "application/json"}},
			Chunks: [][]byte{[]byte(`{"usage":{"prompt_tokens":9,"completion_tokens":3}}`)}}
	})
	if resp.Status != 200 {
		t.Fatalf("request under a limit kept across regions: got %d %s, want 200", resp.Status, resp.Body)
	}
	r.logs.await(t, "settled")
	code, metrics := get(t, "http://"+r.adminAddr+"/metrics")
	if want := `tokenwarden_region_lease_granted_total{counter="tw2:fm:7:company"} 1000`; code != 200 || !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %q", want)
	}
	r.stop(t)

	rdb := redis.NewClient(&redis.Options{Addr: ledger.Addr()})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), "twl1:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("ledger keys: got %v (%v), want one", keys, err)
	}
	h, err := rdb.HGetAll(context.Background(), keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The region's one incarnation in the window: its store's id.
	eu := "eu#" + h["i:eu"]
	n := func(f string) int64 { v, _ := strconv.ParseInt(h[f+eu], 10, 64); return v }
	if g, x, u := n("g:"), n("x:"), n("u:"); g != 1000 || u != 12 || g-x != u {
		t.Errorf("after shutdown the ledger has eu granted %d, released %d, using %d; want 1000 granted, 12 used, the rest released", g, x, u)
	}
}

// A server that fails to start after its region began leasing stops the
// region and returns (it once waited for a signal that never came).
func TestRunWithRegionsFailsToStart(t *testing.T) {
	ledger := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "tokenwarden.yaml")
	config := "store: {type: redis, redis: {url: \"" + ledger.URL() + "\"}}\n" +
		"regions: {name: eu, ledger: {url: \"" + ledger.URL() + "\"}}\n" +
		"limits:\n  - {name: company, dimension: tokens, algorithm: fixed_window, limit: 1000, window: month, across_regions: true}\n"
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(t.Context(), []string{"-config", path, "-listen", "not an address", "-admin", "127.0.0.1:0"}, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("got %v, want the listen error", err)
	}
}
