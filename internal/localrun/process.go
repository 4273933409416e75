package localrun

import (
	"bufio"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
)

// StoppedBySignal reports whether cmd ended by SIGTERM or SIGINT, as the
// commands stop their children: an exit that is not an error.
func StoppedBySignal(cmd *exec.Cmd) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGINT)
}

// HTTPOK reports whether a GET of url answers 200.
func HTTPOK(c *http.Client, url string) bool {
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// TokenwardenHealthy reads Envoy's /clusters, on its admin address, for
// the health flags of the cluster "tokenwarden"'s host: "healthy" once a
// health check has passed (before that, Envoy answers every request 503).
func TokenwardenHealthy(c *http.Client, envoyAdmin string) bool {
	resp, err := c.Get("http://" + envoyAdmin + "/clusters")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "tokenwarden::")
		if ok && strings.Contains(rest, "::health_flags::") {
			return strings.HasSuffix(rest, "::health_flags::healthy")
		}
	}
	return false
}
