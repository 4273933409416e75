package extproc_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// runIdentity reads the agent run's id from x-agent-run-id.
var runIdentity = extproc.Identity{
	Attributes: []extproc.AttributeSource{
		{Name: "tenant", Header: "x-tenant-id"},
		{Name: "run", Header: "x-agent-run-id"},
	},
	Required: []string{"tenant"},
}

// runLimits are the README's example: a run is stopped after its 50th
// step or once it has spent spend, whichever comes first, and after an
// hour.
func runLimits(spend int64) []accounting.Limit {
	return []accounting.Limit{
		{Name: "run-steps", Dimension: accounting.Requests, Algorithm: accounting.Lifetime, Scope: []string{"run"}, Limit: 50, Window: time.Hour},
		{Name: "run-spend", Dimension: accounting.Cost, Algorithm: accounting.Lifetime, Scope: []string{"run"}, Limit: spend, Window: time.Hour},
	}
}

func runStep(run, model string) envoytest.Request {
	body := `{"model":"` + model + `","max_tokens":200,"messages":[{"role":"user","content":"next step"}]}`
	return envoytest.Request{
		Path:    "/v1/chat/completions",
		Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", "t"}, {"x-agent-run-id", run}},
		Body:    []byte(body),
	}
}

var stepUpstream = jsonUpstream(200, []byte(`{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":80,"total_tokens":92}}`))

// wantRunOver checks a 429 from a run budget: it names the limit, tells
// the SDKs not to retry and gives no retry time, and its message says
// what it must.
func wantRunOver(t *testing.T, resp *envoytest.Response, limit, says string) {
	t.Helper()
	wantStatus(t, resp, http.StatusTooManyRequests)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", limit)
	wantHeader(t, resp.Header, "x-should-retry", "false")
	for _, h := range []string{"retry-after", "retry-after-ms"} {
		if v := resp.Header.Values(h); len(v) != 0 {
			t.Errorf("%s: got %q, want none: the run will not recover", h, v)
		}
	}
	if !strings.Contains(string(resp.Body), says) || !strings.Contains(string(resp.Body), `"code":"run_budget_exceeded"`) {
		t.Errorf("body: got %s, want code run_budget_exceeded and %q", resp.Body, says)
	}
	if resp.Upstream != nil {
		t.Errorf("the refused step reached the upstream")
	}
}

// TestRunBudgetSteps: a run's 50 steps are admitted and the next is
// refused for good; another run, and a request outside any run, are not
// held by it.
func TestRunBudgetSteps(t *testing.T) {
	r := newRig(t, runLimits(2_000_000), withServer(func(o *extproc.Options) { o.Identity = runIdentity }))
	ctx := t.Context()
	for i := range 50 {
		resp := r.envoy.Do(ctx, runStep("run-1", "gpt-4o-mini"), stepUpstream)
		wantStatus(t, resp, 200)
		wantHeader(t, resp.Header, "x-ratelimit-remaining-requests", strconv.Itoa(49-i))
	}
	resp := r.envoy.Do(ctx, runStep("run-1", "gpt-4o-mini"), stepUpstream)
	wantRunOver(t, resp, "run-steps", "the run is over, it has spent its 50 requests")
	wantStatus(t, r.envoy.Do(ctx, runStep("run-2", "gpt-4o-mini"), stepUpstream), 200)
	wantStatus(t, r.envoy.Do(ctx, chatRequest("t", []byte(`{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)), stepUpstream), 200)
}

// TestRunBudgetSpend: with a budget of 5 cents at the default price, the
// run's spend stops it before its steps do, and the refusal says how
// much the run has left.
func TestRunBudgetSpend(t *testing.T) {
	r := newRig(t, runLimits(50_000), withServer(func(o *extproc.Options) { o.Identity = runIdentity }))
	ctx := t.Context()
	steps := 0
	var resp *envoytest.Response
	for ; steps < 50; steps++ {
		resp = r.envoy.Do(ctx, runStep("run-1", "gpt-4o"), stepUpstream)
		if resp.Status != 200 {
			break
		}
	}
	if steps == 0 || steps == 50 {
		t.Fatalf("admitted %d steps, want the spend to stop the run between 1 and 49", steps)
	}
	wantRunOver(t, resp, "run-spend", "this request needs 0.0030")
	if !strings.Contains(string(resp.Body), "left of its 0.050000") {
		t.Errorf("body: got %s, want what the run has left of its budget", resp.Body)
	}
}

// TestRunBudgetRequestLargerThanBudget: a step that needs more than the
// run's whole budget is refused as a run budget's refusal
// (run_budget_exceeded, no retry), whose message says that no run could
// take it; the run itself goes on.
func TestRunBudgetRequestLargerThanBudget(t *testing.T) {
	r := newRig(t, runLimits(50_000), withServer(func(o *extproc.Options) { o.Identity = runIdentity }))
	ctx := t.Context()
	// 10,000 output tokens of gpt-4o at the default $15/M: $0.15, three
	// times the run's $0.05.
	big := runStep("run-1", "gpt-4o")
	big.Body = []byte(`{"model":"gpt-4o","max_tokens":10000,"messages":[{"role":"user","content":"next step"}]}`)
	wantRunOver(t, r.envoy.Do(ctx, big, stepUpstream), "run-spend", "but the run's whole budget is 0.050000")
	wantStatus(t, r.envoy.Do(ctx, runStep("run-1", "gpt-4o"), stepUpstream), 200)
}

// TestRunBudgetWallClock: a run is over once its max duration has
// passed since its first step, on the store's clock, whatever it has
// left.
func TestRunBudgetWallClock(t *testing.T) {
	now := time.Now()
	store := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	r := newRig(t, runLimits(2_000_000), withStore(store), withServer(func(o *extproc.Options) { o.Identity = runIdentity }))
	ctx := t.Context()
	wantStatus(t, r.envoy.Do(ctx, runStep("run-1", "gpt-4o-mini"), stepUpstream), 200)
	now = now.Add(time.Hour - time.Second)
	wantStatus(t, r.envoy.Do(ctx, runStep("run-1", "gpt-4o-mini"), stepUpstream), 200)
	now = now.Add(time.Second)
	wantRunOver(t, r.envoy.Do(ctx, runStep("run-1", "gpt-4o-mini"), stepUpstream), "run-steps", "the run is over, its 1h0m0s since its first request have passed")
}
