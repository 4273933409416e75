package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
	"github.com/tokenwarden/tokenwarden/config"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// replicaConfig is a tokenwarden config on the Redis store at url with one
// tokens limit per tenant. The per-call timeout is far above the 50 ms
// default: a couple of hundred reservations arrive at once on a small
// machine, and a store timeout here would be a 503, not the limit at work.
// The window is a fixed one far longer than the test, so no window edge can
// hand out a second budget while it runs.
func replicaConfig(url string, limit int64) string {
	return fmt.Sprintf(`
log: {level: info}
shutdown_grace: 1s
store:
  type: redis
  redis: {url: %q, timeout: 5s}
identity:
  attributes:
    tenant: {header: x-tenant-id}
  required: [tenant]
estimation:
  default_output_cap: 1024
limits:
  - {name: shared-tokens, dimension: tokens, scope: [tenant], algorithm: fixed_window, limit: %d, window: 31d}
`, url, limit)
}

// replicaBody is a large request: its estimate is dominated by max_tokens.
const replicaBody = `{"model":"gpt-4o-mini","max_tokens":100000,"messages":[{"role":"user","content":"Summarise the history of rate limiting."}]}`

// replicaUsage is what every admitted request really uses: 15 + 85 tokens.
const (
	replicaUsageJSON = `{"usage":{"prompt_tokens":15,"completion_tokens":85}}`
	replicaUsage     = 100
)

// replicaRequest is a chat request of replicaBody as tenant.
func replicaRequest(tenant string) envoytest.Request {
	return envoytest.Request{
		Path:    "/v1/chat/completions",
		Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", tenant}},
		Body:    []byte(replicaBody),
	}
}

// replicaEstimate learns the exact estimate of replicaBody from a server of
// its own: the remaining budget after one request under a huge limit.
func replicaEstimate(t *testing.T, url string) int64 {
	t.Helper()
	const huge = int64(1) << 40
	r := start(t, replicaConfig(url, huge))
	resp := envoytest.Connect(t, r.grpcAddr).Do(t.Context(), replicaRequest("estimate-probe"),
		func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
			return envoytest.UpstreamResponse{Status: 200}
		})
	if resp.Status != 200 {
		t.Fatalf("estimate probe: got %d %s %v, want 200", resp.Status, resp.Body, resp.Err)
	}
	remaining, err := strconv.ParseInt(resp.Header.Get("x-ratelimit-remaining-tokens"), 10, 64)
	if err != nil {
		t.Fatalf("estimate probe x-ratelimit-remaining-tokens: %v", err)
	}
	r.stop(t)
	return huge - remaining
}

// TestReplicasShareOneLimit runs several tokenwarden servers on one Redis, the
// way a Deployment's replicas run, and sends them a burst of concurrent large
// requests, alternating between replicas, against a limit that fits ten and a
// half estimates. Every admitted request is held at the upstream until all
// have been decided, so no settlement frees budget in between: the replicas
// together must admit exactly ten (never eleven, and not fewer: the budget is
// not wasted). Then the held requests finish with known usage, and the
// shared counter must equal the sum of that usage.
func TestReplicasShareOneLimit(t *testing.T) {
	srv := redistest.Start(t)
	est := replicaEstimate(t, srv.URL())
	const fits = 10
	limit := est*fits + est/2
	cfg := replicaConfig(srv.URL(), limit)
	parsed, err := config.Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	store, err := redisstore.New(redisstore.Options{URL: srv.URL(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	cases := []struct {
		name               string
		replicas, requests int
	}{
		{"2 replicas, 50 requests", 2, 50},
		{"4 replicas, 200 requests", 4, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tenant := fmt.Sprintf("replicas-%d-%d", tc.replicas, time.Now().UnixNano())
			envoys := make([]*envoytest.Envoy, tc.replicas)
			for i := range envoys {
				envoys[i] = envoytest.Connect(t, start(t, cfg).grpcAddr)
			}

			var decided, admitted, rejected atomic.Int64
			release := make(chan struct{})
			var once sync.Once
			open := func() { once.Do(func() { close(release) }) }
			markDecided := func() {
				if decided.Add(1) == int64(tc.requests) {
					open()
				}
			}
			// Should a request never be decided, release the others after
			// a while rather than hang until the test binary's timeout.
			stuck := time.AfterFunc(60*time.Second, func() {
				t.Errorf("only %d of %d requests decided within 60s", decided.Load(), tc.requests)
				open()
			})
			defer stuck.Stop()

			var wg sync.WaitGroup
			for i := range tc.requests {
				e := envoys[i%tc.replicas]
				wg.Go(func() {
					resp := e.Do(context.Background(), replicaRequest(tenant), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
						admitted.Add(1)
						markDecided()
						<-release
						return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "application/json"}},
							Chunks: [][]byte{[]byte(replicaUsageJSON)}}
					})
					switch {
					case resp.Status == 429 && resp.Upstream == nil:
						rejected.Add(1)
						markDecided()
						if got := resp.Header.Get("x-tokenwarden-limit"); got != "shared-tokens" {
							t.Errorf("request %d: 429 names limit %q, want shared-tokens", i, got)
						}
					case resp.Status == 200 && resp.Upstream != nil:
						// Counted when the upstream was called.
					default:
						if resp.Upstream == nil {
							markDecided()
						}
						t.Errorf("request %d via replica %d: got %d %s %v, want 200 or 429", i, i%tc.replicas, resp.Status, resp.Body, resp.Err)
					}
				})
			}
			wg.Wait()

			t.Logf("estimate %d, limit %d: %d admitted, %d rejected", est, limit, admitted.Load(), rejected.Load())
			if got := admitted.Load(); got != fits {
				t.Errorf("admitted: got %d, want exactly %d (estimate %d, limit %d, %d replicas)", got, fits, est, limit, tc.replicas)
			}
			if got, want := rejected.Load(), int64(tc.requests)-admitted.Load(); got != want {
				t.Errorf("rejected: got %d, want the other %d", got, want)
			}

			// Every admitted request has settled: envoytest returns only
			// after the reply to the last response message, which comes
			// after settlement. The shared counter holds their usage, and
			// nothing of the rejected ones.
			want := admitted.Load() * replicaUsage
			if got := replicaUsed(t, store, &parsed.Accounting.Limits[0], tenant); got != want {
				t.Errorf("shared counter after settlement: got %d, want the sum of usage %d", got, want)
			}
			// Every replica reads the same counter: one more request through
			// each sees the refunds made by the others.
			for i, e := range envoys {
				resp := e.Do(t.Context(), replicaRequest(tenant), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
					return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "application/json"}},
						Chunks: [][]byte{[]byte(replicaUsageJSON)}}
				})
				if resp.Status != 200 {
					t.Fatalf("replica %d after settlement: got %d %s %v, want 200", i, resp.Status, resp.Body, resp.Err)
				}
				// Each of these requests settled at usage before the next.
				want := limit - (admitted.Load()+int64(i))*replicaUsage - est
				if got := resp.Header.Get("x-ratelimit-remaining-tokens"); got != strconv.FormatInt(want, 10) {
					t.Errorf("replica %d after settlement: x-ratelimit-remaining-tokens got %s, want %d", i, got, want)
				}
			}
		})
	}
}

// replicaUsed reads how much of limit's counter for tenant is used, straight
// from Redis: a reservation of zero reports what remains.
func replicaUsed(t *testing.T, store *redisstore.Store, limit *accounting.Limit, tenant string) int64 {
	t.Helper()
	c := limit.Counter(accounting.Attributes{{Name: "tenant", Value: tenant}})
	res, err := store.Reserve(context.Background(), accounting.ReserveRequest{
		ID: "probe-" + tenant, Items: []accounting.ReserveItem{{Counter: c, Amount: 0}},
	})
	if err != nil {
		t.Fatalf("reading the counter from Redis: %v", err)
	}
	return limit.Capacity() - res.States[0].Remaining
}
