package envoy

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// e2eWaitCapacity is e2e-wait's requests per window.
const e2eWaitCapacity = 3

// twMetric returns the sum of tokenwarden's series name{labels...}, as
// its /metrics shows them now (labels given as `outcome="admitted"`).
func (r *e2eRig) twMetric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	code, body, err := e2eGet("http://" + r.tokenwarden().admin + "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("tokenwarden /metrics: %d %v", code, err)
	}
	var sum float64
	for line := range strings.Lines(body) {
		series, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || (series != name && !strings.HasPrefix(series, name+"{")) {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(series, l)
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil && match {
			sum += v
		}
	}
	return sum
}

// e2eWaitWindow is e2e-wait's window.
const e2eWaitWindow = 2 * time.Second

// startOfWaitWindow returns 100 ms into the next of e2e-wait's windows,
// which the memory store aligns to the Unix epoch on this machine's
// clock: a test that starts its burst there has the rest of the window
// to send it in, so that which requests must wait does not depend on
// where in a window the test happens to run.
func startOfWaitWindow() {
	next := time.Now().Truncate(e2eWaitWindow).Add(e2eWaitWindow + 100*time.Millisecond)
	time.Sleep(time.Until(next))
}

// awaitMetric polls tokenwarden's metric until cond holds (5 s at most).
func (r *e2eRig) awaitMetric(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2EWaitServesABurst: through the real Envoy, a burst of twice
// e2e-wait's capacity is all served, with waits instead of 429s: the
// requests the window cannot take are held (Envoy granting the
// override_message_timeout tokenwarden asks for) and admitted when the
// next window opens, in the order they came, and no window admits more
// than its capacity. The store's remaining figure on each reply shows
// both: within a window it counts down by one per admission, in the
// order the requests were sent, and never below zero.
//
// The requests are sent one after the other, each once the one before
// it is answered or waiting (tokenwarden_waiting), so that the order
// they arrive in is the order they were sent. The test runs alone:
// tokenwarden_waiting is process-wide.
func TestE2EWaitServesABurst(t *testing.T) {
	r := e2e(t)
	c := newE2ECaller(t, "wait")
	body := e2eChat(t, "Say hi.", 10, false)
	admittedBefore := r.twMetric(t, "tokenwarden_waited_total", `outcome="admitted"`)
	startOfWaitWindow()

	type reply struct {
		resp *e2eResponse
		err  error
		took time.Duration
	}
	const n = 2 * e2eWaitCapacity
	replies := make([]chan reply, n)
	done := 0
	for i := range n {
		replies[i] = make(chan reply, 1)
		start := time.Now()
		go func() {
			resp, err := r.send(t, c, body, fmt.Sprintf("%s-%d", c.tenant, i))
			replies[i] <- reply{resp, err, time.Since(start)}
		}()
		r.awaitMetric(t, fmt.Sprintf("request %d to be answered or waiting", i), func() bool {
			for _, ch := range replies[done : i+1] {
				if len(ch) == 0 {
					break
				}
				done++
			}
			return done+int(r.twMetric(t, "tokenwarden_waiting")) >= i+1
		})
	}
	prev := int64(-1)
	windows := 0
	for i, ch := range replies {
		got := <-ch
		if got.err != nil {
			t.Fatalf("request %d: %v", i, got.err)
		}
		e2eWantStatus(t, got.resp, http.StatusOK)
		rem := e2eIntHeader(t, got.resp, "x-ratelimit-remaining-requests")
		// Envoy's access log has how long tokenwarden held it.
		waited := accessLogLine(t, r.envoy.stdout, fmt.Sprintf("%s-%d", c.tenant, i))["tw_wait_seconds"]
		t.Logf("request %d: 200 after %v, %d left in its window, held %v s", i, got.took.Round(time.Millisecond), rem, waited)
		if w, _ := waited.(float64); (i < e2eWaitCapacity) != (waited == nil) || (waited != nil && w <= 1) {
			t.Errorf("request %d: access log tw_wait_seconds %v, want none for the first %d, over 1s for the rest", i, waited, e2eWaitCapacity)
		}
		switch {
		case rem == e2eWaitCapacity-1:
			windows++ // the first admission of a window
		case rem != prev-1:
			t.Errorf("request %d: %d left, want %d (one less than request %d) or %d (a new window): admitted out of order", i, rem, prev-1, i-1, e2eWaitCapacity-1)
		}
		if rem < 0 {
			t.Errorf("request %d: %d left: the window admitted more than its %d", i, rem, e2eWaitCapacity)
		}
		prev = rem
	}
	if windows != 2 {
		t.Errorf("the burst was admitted in %d window(s), want 2", windows)
	}
	if got := r.twMetric(t, "tokenwarden_waited_total", `outcome="admitted"`) - admittedBefore; got != e2eWaitCapacity {
		t.Errorf("waited_total{admitted} rose by %v, want %d (the second half of the burst)", got, e2eWaitCapacity)
	}
}

// TestE2EWaitClientLeaves: a client that hangs up on a held request
// frees its place at once: Envoy resets the ext_proc stream, and
// tokenwarden counts the wait cancelled and reserves nothing for it.
func TestE2EWaitClientLeaves(t *testing.T) {
	r := e2e(t)
	c := newE2ECaller(t, "wait")
	body := e2eChat(t, "Say hi.", 10, false)
	cancelledBefore := r.twMetric(t, "tokenwarden_waited_total", `outcome="cancelled"`)
	startOfWaitWindow()
	for range e2eWaitCapacity {
		e2eWantStatus(t, r.mustSend(t, c, body, ""), http.StatusOK)
	}
	ctx, hangUp := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		resp, err := r.open(t, ctx, c, body, "")
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %d before the client hung up", resp.StatusCode)
		}
		errc <- err
	}()
	r.awaitMetric(t, "the request to be held", func() bool { return r.twMetric(t, "tokenwarden_waiting") == 1 })
	hangUp()
	<-errc
	r.awaitMetric(t, "the held request to leave", func() bool { return r.twMetric(t, "tokenwarden_waiting") == 0 })
	if got := r.twMetric(t, "tokenwarden_waited_total", `outcome="cancelled"`) - cancelledBefore; got != 1 {
		t.Errorf("waited_total{cancelled} rose by %v, want 1", got)
	}
}
