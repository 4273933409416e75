//go:build unix

package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// TestRunReloadsOnSIGHUP sends the process a real SIGHUP while the
// server runs in it: the server reloads its file, then refuses a change
// of store, and keeps serving on the config it applied.
func TestRunReloadsOnSIGHUP(t *testing.T) {
	// The test's own registration: should a SIGHUP arrive when the
	// server has none, it lands here rather than ending the test binary.
	own := make(chan os.Signal, 4)
	signal.Notify(own, syscall.SIGHUP)
	defer signal.Stop(own)

	// The watch is off: every reload here is the signal's.
	r := start(t, testConfig+"reload: {watch_interval: off}\n")
	envoy := envoytest.Connect(t, r.grpcAddr)
	limit := func() string {
		t.Helper()
		resp := chat(t.Context(), envoy)
		if resp.Status != 200 {
			t.Fatalf("request: got %d %s %v, want 200", resp.Status, resp.Body, resp.Err)
		}
		return resp.Header.Get("x-ratelimit-limit-tokens")
	}
	if got := limit(); got != "100000" {
		t.Fatalf("limit at start: got %s, want 100000", got)
	}
	write := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(r.path+".new", []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(r.path+".new", r.path); err != nil {
			t.Fatal(err)
		}
	}
	hup := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	write(strings.Replace(testConfig, "limit: 100000", "limit: 200000", 1) + "reload: {watch_interval: off}\n")
	hup()
	r.logs.await(t, "config reloaded")
	if got := limit(); got != "200000" {
		t.Errorf("limit after SIGHUP: got %s, want 200000", got)
	}

	write(testConfig + "reload: {watch_interval: off}\nstore: {type: redis, redis: {url: 'redis://127.0.0.1:1'}}\n")
	hup()
	m := r.logs.await(t, "config reload refused: it changes settings that apply only at a restart; the config in force stays")
	if fields := fmt.Sprint(m["fields"]); !strings.Contains(fields, "store.type") {
		t.Errorf("refusal names %s, want store.type", fields)
	}
	if got := limit(); got != "200000" {
		t.Errorf("limit after a refused reload: got %s, want still 200000", got)
	}
	code, metrics := get(t, "http://"+r.adminAddr+"/metrics")
	for _, want := range []string{
		`tokenwarden_config_reloads_total{outcome="applied"} 1`,
		`tokenwarden_config_reloads_total{outcome="refused"} 1`,
		`tokenwarden_config_reloads_total{outcome="invalid"} 0`,
		"tokenwarden_config_last_reload_successful 0",
		"tokenwarden_config_last_reload_success_timestamp_seconds ",
		`tokenwarden_config_info{sha256="`,
	} {
		if code != 200 || !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	r.stop(t)
}

// TestRunWatchesTheFile: with a watch interval, a changed file applies
// without a signal.
func TestRunWatchesTheFile(t *testing.T) {
	r := start(t, testConfig+"reload: {watch_interval: 1s}\n")
	if err := os.WriteFile(r.path+".new", []byte(strings.Replace(testConfig, "limit: 100000", "limit: 300000", 1)+"reload: {watch_interval: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(r.path+".new", r.path); err != nil {
		t.Fatal(err)
	}
	if m := r.logs.await(t, "config reloaded"); m["trigger"] != "watch" {
		t.Errorf("trigger: got %v, want watch", m["trigger"])
	}
	resp := chat(t.Context(), envoytest.Connect(t, r.grpcAddr))
	if got := resp.Header.Get("x-ratelimit-limit-tokens"); resp.Status != 200 || got != "300000" {
		t.Errorf("after the watch's reload: got %d, limit %s, want 200 and 300000", resp.Status, got)
	}
	r.stop(t)
}
