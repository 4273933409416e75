package envoy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The burst TestE2ERequestBytesBurst sends, by default the one of the
// issue it answers: 24 bodies of 40 MB at once.
var (
	burstBodies    = flag.Int("e2e.burst-bodies", 24, "TestE2ERequestBytesBurst: request bodies sent at once in each burst")
	burstBodyBytes = flag.Int("e2e.burst-bytes", 40_000_000, "TestE2ERequestBytesBurst: the size of each body")
)

// TestE2ERequestBytesBurst: a burst of large request bodies, through the
// real Envoy on the shipped envoy.yaml, to a tokenwarden run with the
// memory the shipped Kubernetes Deployment gives it (its GOMEMLIMIT, from
// which tokenwarden derives its request bytes in flight), keeps
// tokenwarden's peak resident memory under the Deployment's memory limit.
// Each burst is 24 chat completions of 40 MB (an image inline, without an
// output cap, so that each is edited too): first from one tenant, while
// another tenant sends small requests, which are all served; then from
// eight tenants, which fill the replica's whole budget. Every request is
// answered, tokenwarden stays up, and nothing stays charged.
//
// The rig is its own (tokenwarden and Envoy, sharing the shared rig's
// binaries and fakellm): its tokenwarden's VmHWM is this test's alone, and
// its Envoy waits up to 30 s for each ext_proc reply, not the shipped 1 s,
// so that how fast the machine moves 40 MB bodies decides no answer.
// Peak memory and the small requests' latency are logged, not judged.
func TestE2ERequestBytesBurst(t *testing.T) {
	shared := e2e(t)
	container := path(t, kubeManifests(t)["Deployment"], "spec", "template", "spec", "containers", 0)
	var goLimit string
	for _, e := range path(t, container, "env").([]any) {
		if e := e.(map[string]any); e["name"] == "GOMEMLIMIT" {
			goLimit = fmt.Sprint(e["value"])
		}
	}
	podLimit := kubeBytes(t, fmt.Sprint(path(t, container, "resources", "limits", "memory")))
	if goLimit == "" {
		t.Fatal("the Deployment sets no GOMEMLIMIT")
	}
	r := startOwnRig(t, shared, []string{"GOMEMLIMIT=" + goLimit}, extProcMessageTimeout(t, "30s"))
	tw := r.tokenwarden()
	started, _ := tw.awaitLog("tokenwarden started", time.Second)
	t.Logf("tokenwarden with GOMEMLIMIT=%s (pod limit %d): %v bytes in flight, %v per principal",
		goLimit, podLimit, started["request_bytes_in_flight"], started["request_bytes_per_principal"])

	began := time.Now()
	body := inlineImageChat(t, *burstBodyBytes)
	t.Logf("rig up and body made in %v", time.Since(began).Round(time.Millisecond))

	// One tenant's burst, and another tenant's small requests meanwhile.
	a, b := newE2ECaller(t), newE2ECaller(t)
	callers := make([]e2eCaller, *burstBodies)
	for i := range callers {
		callers[i] = a
	}
	var small []time.Duration
	began = time.Now()
	statuses := r.burst(t, callers, body, func() {
		start := time.Now()
		resp := r.mustSend(t, b, e2eChat(t, "hello", 10, false), "")
		e2eWantStatus(t, resp, http.StatusOK)
		small = append(small, time.Since(start))
	})
	wantStatuses(t, "one tenant's burst", statuses, http.StatusOK, http.StatusTooManyRequests)
	if !slices.Contains(statuses, http.StatusOK) {
		t.Errorf("one tenant's burst: got %v, want its first body admitted", statuses)
	}
	hwm := vmHWM(t, tw)
	slices.Sort(small)
	t.Logf("one tenant's burst: statuses %v in %v; peak RSS %d MiB; the other tenant's %d small requests took %v median, %v at the 90th percentile, %v at most",
		countStatuses(statuses), time.Since(began).Round(time.Millisecond), hwm>>20, len(small),
		small[len(small)/2].Round(time.Microsecond), small[len(small)*9/10].Round(time.Microsecond), small[len(small)-1].Round(time.Microsecond))

	// Eight tenants fill the replica's budget.
	for i := range callers {
		if i < 8 {
			callers[i] = newE2ECaller(t)
		} else {
			callers[i] = callers[i%8]
		}
	}
	began = time.Now()
	statuses = r.burst(t, callers, body, nil)
	wantStatuses(t, "eight tenants' burst", statuses, http.StatusOK, http.StatusTooManyRequests, http.StatusServiceUnavailable)
	hwm = vmHWM(t, tw)
	t.Logf("eight tenants' burst: statuses %v in %v; peak RSS %d MiB", countStatuses(statuses), time.Since(began).Round(time.Millisecond), hwm>>20)

	if tw.exited() {
		t.Fatalf("tokenwarden exited:\n%s", tw.stderr.String())
	}
	if hwm >= podLimit {
		t.Errorf("tokenwarden's peak RSS %d bytes (%d MiB), want under the pod's memory limit %d", hwm, hwm>>20, podLimit)
	}
	r.awaitMetric(t, "no request bytes in flight", func() bool { return r.twMetric(t, "tokenwarden_request_bytes_in_flight") == 0 })
}

// burst sends body as each of callers at once, calls meanwhile (when not
// nil) until every one is answered, at least three times, and returns
// their statuses.
func (r *e2eRig) burst(t *testing.T, callers []e2eCaller, body []byte, meanwhile func()) []int {
	t.Helper()
	statuses := make([]int, len(callers))
	var wg sync.WaitGroup
	for i, c := range callers {
		wg.Go(func() {
			resp, err := r.send(t, c, body, "")
			if err != nil {
				t.Errorf("body %d: %v", i, err)
				return
			}
			statuses[i] = resp.status
			if resp.status != http.StatusOK {
				var e struct {
					Error struct{ Code string } `json:"error"`
				}
				if json.Unmarshal(resp.body, &e) != nil || e.Error.Code == "" {
					t.Errorf("body %d: %d without an error in the API's shape: %.200s", i, resp.status, resp.body)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for n := 0; meanwhile != nil; n++ {
		select {
		case <-done:
			if n >= 3 {
				return statuses
			}
		default:
		}
		meanwhile()
	}
	<-done
	return statuses
}

// wantStatuses fails the test for a status not in want.
func wantStatuses(t *testing.T, what string, got []int, want ...int) {
	t.Helper()
	for i, s := range got {
		if !slices.Contains(want, s) {
			t.Errorf("%s: body %d answered %d, want one of %v", what, i, s, want)
		}
	}
}

// countStatuses counts statuses by value.
func countStatuses(statuses []int) map[int]int {
	n := map[int]int{}
	for _, s := range statuses {
		n[s]++
	}
	return n
}

// inlineImageChat is a chat completion of about size bytes: a PNG inline,
// whose header gives its size, followed by zero bytes, and no output cap.
func inlineImageChat(t *testing.T, size int) []byte {
	t.Helper()
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewGray(image.Rect(0, 0, 64, 64))); err != nil {
		t.Fatal(err)
	}
	// Zero bytes, three at a time, are "AAAA" in base64: the padding is
	// written as such, which the race detector does not slow down as it
	// does the encoder.
	img.Write(make([]byte, (3-img.Len()%3)%3))
	head := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + base64.StdEncoding.EncodeToString(img.Bytes())
	tail := `"}}]}]}`
	pad := max(0, size-len(head)-len(tail)) / 4 * 4
	return []byte(head + strings.Repeat("A", pad) + tail)
}

// vmHWM is the peak resident memory of tokenwarden's process, in bytes,
// from /proc/<pid>/status.
func vmHWM(t *testing.T, tw *twProcess) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tw.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// kubeBytes reads a Kubernetes memory quantity in binary units (1152Mi).
func kubeBytes(t *testing.T, q string) int64 {
	t.Helper()
	for suffix, shift := range map[string]uint{"Gi": 30, "Mi": 20, "Ki": 10} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("memory %q: %v", q, err)
			}
			return v << shift
		}
	}
	t.Fatalf("memory %q: want a quantity in Ki, Mi or Gi", q)
	return 0
}

// extProcMessageTimeout sets the ext_proc filter's message_timeout.
func extProcMessageTimeout(t *testing.T, d string) func(doc map[string]any) {
	return func(doc map[string]any) {
		hcm := path(t, doc, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config")
		f := named(t, path(t, hcm, "http_filters"), "envoy.filters.http.ext_proc")
		path(t, f, "typed_config").(map[string]any)["message_timeout"] = d
	}
}

// startOwnRig starts a tokenwarden (with env added to its environment) on
// the shared rig's config, and an Envoy on envoy.yaml (edited by edits) in
// front of it and the shared rig's fakellm; both stop with the test.
func startOwnRig(t *testing.T, shared *e2eRig, env []string, edits ...func(doc map[string]any)) *e2eRig {
	t.Helper()
	r := &e2eRig{dir: t.TempDir(), twBin: shared.twBin, twConfig: shared.twConfig, llmAddr: shared.llmAddr, twEnv: env}
	tw, err := r.startTokenwarden("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.tw = tw
	t.Cleanup(tw.kill)
	cfg := filepath.Join(r.dir, "envoy.yaml")
	a := addrs{listen: "127.0.0.1:0", admin: "127.0.0.1:0", tokenwarden: tw.listen, upstream: shared.llmAddr}
	if err := os.WriteFile(cfg, renderBootstrap(t, a, edits...), 0o644); err != nil {
		t.Fatal(err)
	}
	adminFile := filepath.Join(r.dir, "envoy-admin-address")
	r.envoy, err = startE2EProc(r.dir, "envoy", envoyBinary(t), "-c", cfg, "--disable-hot-restart", "--concurrency", "2",
		"--log-level", "warn", "--admin-address-path", adminFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.envoy.kill)
	if err := r.awaitEnvoy(adminFile, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return r
}
