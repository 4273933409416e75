package envoy

import (
	"bufio"
	"net/http"
	"testing"
	"time"
)

// TestE2EConcurrentLimitCutStream: through the real Envoy, a concurrent
// limit of 2 (e2e-parallel) admits two streams of one tenant in flight,
// refuses a third with a 429 naming it (retry-after 1), and a client that
// hangs up on one of the streams gives its slot back: the next request is
// admitted while the other stream still runs, and holds the last slot.
func TestE2EConcurrentLimitCutStream(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t, "parallel")
	stream := e2eChat(t, "Count slowly to ten.", 200, true)
	short := e2eChat(t, "Say hi.", 20, false)
	// Ten chunks, 300 ms apart: both streams run for three seconds
	// unless cut.
	slow := []string{"x-fakellm-chunks", "10", "x-fakellm-chunk-delay", "300ms"}

	openStream := func(tag string, wantRemaining string) *http.Response {
		t.Helper()
		resp, err := r.open(t, t.Context(), c, stream, tag, slow...)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			t.Fatalf("%s: status %d, want 200", tag, resp.StatusCode)
		}
		if got := resp.Header.Get("x-ratelimit-remaining-concurrent"); got != wantRemaining {
			t.Errorf("%s: x-ratelimit-remaining-concurrent: got %q, want %s", tag, got, wantRemaining)
		}
		return resp
	}
	first := openStream(c.tenant+"-first", "1")
	defer first.Body.Close()
	second := openStream(c.tenant+"-second", "0")
	defer second.Body.Close()

	third := r.mustSend(t, c, short, c.tenant+"-third")
	e2eWantStatus(t, third, http.StatusTooManyRequests)
	if got := third.header.Get("x-tokenwarden-limit"); got != "e2e-parallel" {
		t.Errorf("x-tokenwarden-limit: got %q, want e2e-parallel", got)
	}
	if got := third.header.Get("retry-after"); got != "1" {
		t.Errorf("retry-after: got %q, want 1", got)
	}

	// The client hangs up on the first stream after one content chunk.
	br := bufio.NewReader(first.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the first stream: %v", err)
		}
		if e2eContentChunk(line) {
			break
		}
	}
	first.Body.Close()
	settled := r.awaitSettled(t, accessLogLine(t, r.envoy.stdout, c.tenant+"-first"), 5*time.Second)
	t.Logf("cut stream settled: %v", settled)

	// Its slot is free; the second stream still holds the other.
	fourth := r.mustSend(t, c, short, c.tenant+"-fourth")
	e2eWantStatus(t, fourth, http.StatusOK)
	if got := e2eIntHeader(t, fourth, "x-ratelimit-remaining-concurrent"); got != 0 {
		t.Errorf("fourth: x-ratelimit-remaining-concurrent: got %d, want 0 (the second stream still runs)", got)
	}
	if _, err := second.Body.Read(make([]byte, 1)); err != nil {
		t.Fatalf("the second stream ended before the fourth request was checked: %v", err)
	}
}
