package envoy

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tokenwarden/tokenwarden/config"
)

// TestE2EKubernetesConfigDrainsALongStream runs tokenwarden on the
// Kubernetes ConfigMap's config (its store swapped for memory) behind
// the rig's Envoy, and sends it SIGTERM — what a rollout or a node drain
// does — while a stream has longer to run than the server's default
// grace: the stream runs to its end, settles on its usage, and the
// process then exits 0. With the default grace it would be cut.
//
// It runs serially: the other e2e tests share the rig's tokenwarden,
// which it stops and starts again.
func TestE2EKubernetesConfigDrainsALongStream(t *testing.T) {
	r := e2e(t)
	_, cfg, _ := kubeTokenwardenConfig(t)
	cfg["store"] = map[string]any{"type": "memory"}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeConfig := writeTemp(t, "tokenwarden.yaml", raw)

	// Swap the rig's tokenwarden for one on the Kubernetes config, on the
	// same address, and put the rig's back afterwards.
	old := r.tokenwarden()
	if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-old.done
	kube, err := r.startTokenwardenWith(kubeConfig, old.listen, old.admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		kube.kill()
		if err := r.restartTokenwarden(old); err != nil {
			t.Errorf("restarting the rig's tokenwarden: %v", err)
		}
	})
	r.mu.Lock()
	r.tw = kube
	r.mu.Unlock()

	c := newE2ECaller(t)
	// The stream outlasts the server's default grace after SIGTERM.
	chunks := int(config.DefaultShutdownGrace/time.Second) + 3
	deadline := time.Now().Add(10 * time.Second)
	var resp *http.Response
	tag := c.tenant + "-kube-drain"
	for {
		// Until Envoy's health check finds the new process.
		resp, err = r.open(t, t.Context(), c, e2eChat(t, "hello", 100, true), tag,
			"x-fakellm-chunks", strconv.Itoa(chunks), "x-fakellm-chunk-delay", "1s", "x-fakellm-input-tokens", "250", "x-fakellm-output-tokens", "40")
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		if err == nil {
			resp.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stream through the Kubernetes-config tokenwarden within 10 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if first, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(first, "data: ") {
		t.Fatalf("first line %q, %v", first, err)
	}
	if err := kube.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "[DONE]") {
		t.Errorf("stream after SIGTERM: got %d bytes, err %v, want it to run to [DONE]", len(rest), err)
	}
	select {
	case <-kube.done:
	case <-time.After(10 * time.Second):
		t.Fatal("tokenwarden still running 10 s after its last stream ended")
	}
	if code := kube.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status after SIGTERM: got %d, want 0\n%s", code, kube.stderr.String())
	}
	line := accessLogLine(t, r.envoy.stdout, tag)
	if line["tw_settled_on"] != "usage" || line["tw_actual_tokens"] != float64(250+40) {
		t.Errorf("access log: settled on %v with %v tokens, want usage and 290", line["tw_settled_on"], line["tw_actual_tokens"])
	}
}
