package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/internal/envoytest"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// leaseConfig shares a concurrent limit of 1 per tenant on the Redis at
// url, with a lease of lease.
func leaseConfig(url string, lease time.Duration) string {
	return fmt.Sprintf(`
log: {level: info, format: json}
shutdown_grace: 1s
store:
  type: redis
  redis: {url: %q, timeout: 5s}
identity:
  attributes:
    tenant: {header: x-tenant-id}
  required: [tenant]
limits:
  - {name: in-flight, dimension: concurrent, scope: [tenant], limit: 1, lease: %s}
`, url, lease)
}

// TestCrashedReplicaLeaseFrees: a tokenwarden process on Redis admits a
// request (taking the tenant's only slot) and is killed (SIGKILL) while
// the request is in flight, so it never settles. Another replica on the
// same Redis refuses the tenant's next request while the dead replica's
// lease runs, and admits one once the lease has passed on Redis's clock:
// a crashed replica's slots come back within the lease. The wait is a
// bounded poll, as Redis's clock cannot be moved.
func TestCrashedReplicaLeaseFrees(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a tokenwarden process")
	}
	const lease = 3 * time.Second
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenwarden.yaml")
	if err := os.WriteFile(cfg, []byte(leaseConfig(srv.URL(), lease)), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tokenwarden")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// The replica that will die, as a process of its own.
	proc := exec.Command(bin, "-config", cfg, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	logs, err := proc.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "tokenwarden started" {
				addr <- fmt.Sprint(rec["listen"])
			}
		}
	}()
	var doomed *envoytest.Envoy
	select {
	case a := <-addr:
		doomed = envoytest.Connect(t, a)
	case <-time.After(30 * time.Second):
		t.Fatal("the replica process did not start")
	}
	// The replica that lives, in this process, up before the crash.
	live := envoytest.Connect(t, start(t, leaseConfig(srv.URL(), lease)).grpcAddr)

	entered, release, ended := make(chan struct{}), make(chan struct{}), make(chan *envoytest.Response, 1)
	go func() {
		ended <- doomed.Do(t.Context(), replicaRequest("t"), func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
			close(entered)
			<-release
			return envoytest.UpstreamResponse{Status: 200}
		})
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the doomed replica's request never reached the upstream")
	}
	taken := time.Now() // the lease was taken before this
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	close(release)
	if resp := <-ended; resp.Status == 200 && resp.Err == nil {
		t.Fatalf("the killed replica's request completed, want it failed")
	}

	ok := func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "application/json"}},
			Chunks: [][]byte{[]byte(replicaUsageJSON)}}
	}
	resp := live.Do(t.Context(), replicaRequest("t"), ok)
	if since := time.Since(taken); resp.Status != 429 && since < lease-500*time.Millisecond {
		t.Fatalf("right after the crash (%v): got %d %s, want 429 while the dead replica's lease runs", since, resp.Status, resp.Body)
	}
	if got := resp.Header.Get("x-tokenwarden-limit"); resp.Status == 429 && got != "in-flight" {
		t.Errorf("x-tokenwarden-limit: got %q, want in-flight", got)
	}
	deadline := taken.Add(lease + 5*time.Second)
	for resp.Status != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("the dead replica's lease still held %v after it was taken (lease %v): %d %s", time.Since(taken), lease, resp.Status, resp.Body)
		}
		time.Sleep(100 * time.Millisecond)
		resp = live.Do(t.Context(), replicaRequest("t"), ok)
	}
	if since := time.Since(taken); since < lease-500*time.Millisecond {
		t.Errorf("the dead replica's lease freed %v after it was taken, before its lease of %v", since, lease)
	}
	t.Logf("the dead replica's lease freed %v after the request reached the upstream (lease %v)", time.Since(taken).Round(10*time.Millisecond), lease)
}
