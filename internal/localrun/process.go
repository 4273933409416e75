package localrun

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"time"
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

// Check is one condition a command waits for while the stack starts.
type Check struct {
	What string // what is awaited, for an error message
	OK   func() bool
}

// StackChecks are the conditions the stack is ready on, in the order
// they come true: fakellm listens, tokenwarden's /readyz and Envoy's
// /ready answer 200, and Envoy's gRPC health check of tokenwarden has
// passed (before that, Envoy answers every request 503). c asks the
// admin endpoints.
func StackChecks(c *http.Client, fakellm, tokenwardenAdmin, envoyAdmin string) []Check {
	return []Check{
		{"fakellm to listen on " + fakellm, func() bool { return listening(fakellm) }},
		{"tokenwarden's /readyz", func() bool { return HTTPOK(c, "http://"+tokenwardenAdmin+"/readyz") }},
		{"Envoy's /ready", func() bool { return HTTPOK(c, "http://"+envoyAdmin+"/ready") }},
		{"Envoy's health check of tokenwarden", func() bool { return TokenwardenHealthy(c, envoyAdmin) }},
	}
}

// listening reports whether something accepts connections on addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}
