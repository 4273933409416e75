package extproc_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// TestSettlingRefusalReply is the daily budget held by a stream in
// flight: with $0.62 of a $1/day budget held by one gpt-4o request's
// reservation, a second one is refused, but not until tomorrow: its 429
// invites a retry within accounting.InFlightRetryAfter (no
// x-should-retry: false, no "do not retry before"), says what the
// request in flight holds, and when the limit has room if it uses all of
// it. Once the first settles on what it used, the retry is admitted.
func TestSettlingRefusalReply(t *testing.T) {
	spend := accounting.Limit{Name: "tenant-daily-spend", Dimension: accounting.Cost, Scope: []string{"tenant"},
		Algorithm: accounting.FixedWindow, Limit: 1_000_000, Window: 24 * time.Hour}
	r := newRig(t, []accounting.Limit{spend})
	// 40,000 output tokens of gpt-4o at the rig's default $15/M: $0.60,
	// and the input.
	body := []byte(`{"model":"gpt-4o","max_tokens":40000,"messages":[{"role":"user","content":"Write a long story."}]}`)
	finish := holdInFlight(t, r, chatRequest("a", body), `{"choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":5000,"total_tokens":6000}}`)

	before := time.Now()
	resp := r.envoy.Do(t.Context(), chatRequest("a", body), nil)
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "tenant-daily-spend")
	if v := resp.Header.Values("x-should-retry"); len(v) != 0 {
		t.Errorf("x-should-retry: got %q, want none: the request in flight may give back what this one lacks", v)
	}
	wantHeader(t, resp.Header, "retry-after", "5")
	wantHeader(t, resp.Header, "retry-after-ms", "5000")
	at, err := time.Parse(time.RFC3339, resp.Header.Get("x-tokenwarden-reset-at"))
	if lo, hi := before.Add(5*time.Second), time.Now().Add(6*time.Second); err != nil || at.Before(lo.Truncate(time.Second)) || at.After(hi) {
		t.Errorf("x-tokenwarden-reset-at: got %q, want the retry's time, about 5 s from now", resp.Header.Get("x-tokenwarden-reset-at"))
	}
	e := decodeError(t, resp.Body)
	// Midnight, or the second after: the reply's clock is a little past
	// the store's, and the time is rounded up to a whole second.
	midnight := before.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Format("2006-01-02T15:04:0")
	for _, want := range []string{"Requests still in flight hold 0.600", "please try again in 5s", "the limit has room again at " + midnight} {
		if !strings.Contains(e.Error.Message, want) {
			t.Errorf("message %q does not say %q", e.Error.Message, want)
		}
	}
	if strings.Contains(e.Error.Message, "do not retry") || e.Error.Code != "rate_limit_exceeded" {
		t.Errorf("code %q, message %q: want rate_limit_exceeded, and an invitation to retry", e.Error.Code, e.Error.Message)
	}

	wantStatus(t, finish(), 200)
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", body), jsonUpstream(200, []byte(`{"choices":[]}`))), 200)
}

// holdInFlight sends req and returns once the upstream has it, holding its
// answer (reply, JSON) back until finish is called; finish returns the
// response once the request has settled.
func holdInFlight(t *testing.T, r *rig, req envoytest.Request, reply string) (finish func() *envoytest.Response) {
	t.Helper()
	release, started := make(chan struct{}), make(chan struct{})
	done := make(chan *envoytest.Response, 1)
	go func() {
		done <- r.envoy.Do(t.Context(), req, func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
			close(started)
			<-release
			return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "application/json"}}, Chunks: [][]byte{[]byte(reply)}}
		})
	}()
	<-started
	return func() *envoytest.Response {
		close(release)
		resp := <-done
		r.envoy.Wait()
		return resp
	}
}

// TestSettlingRunBudgetReply: an agent run whose steps run in parallel,
// one of them holding most of the run's budget in flight: the next step
// is refused as a run budget's (run_budget_exceeded), but not as a run
// that is over: a retry within accounting.InFlightRetryAfter may find
// room once the step in flight settles, and does.
func TestSettlingRunBudgetReply(t *testing.T) {
	r := newRig(t, runLimits(50_000), withServer(func(o *extproc.Options) { o.Identity = runIdentity }))
	big := runStep("run-1", "gpt-4o")
	// 2,000 output tokens of gpt-4o at $15/M: $0.03 of the run's $0.05.
	big.Body = []byte(`{"model":"gpt-4o","max_tokens":2000,"messages":[{"role":"user","content":"next step"}]}`)
	finish := holdInFlight(t, r, big, `{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":100,"total_tokens":110}}`)

	resp := r.envoy.Do(t.Context(), big, nil)
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "run-spend")
	wantHeader(t, resp.Header, "retry-after", "5")
	if v := resp.Header.Values("x-should-retry"); len(v) != 0 {
		t.Errorf("x-should-retry: got %q, want none: the run's step in flight may give back what this one lacks", v)
	}
	e := decodeError(t, resp.Body)
	if e.Error.Code != "run_budget_exceeded" || !strings.Contains(e.Error.Message, "please try again in 5s") || strings.Contains(e.Error.Message, "Retrying will not help") {
		t.Errorf("got %q: %q; want run_budget_exceeded inviting a retry", e.Error.Code, e.Error.Message)
	}
	wantStatus(t, finish(), 200)
	wantStatus(t, r.envoy.Do(t.Context(), big, stepUpstream), 200)
}
