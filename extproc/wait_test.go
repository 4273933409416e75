package extproc_test

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// waitingLimit is one request per window per tenant, and a refused one
// waits up to wait.
func waitingLimit(window, wait time.Duration) accounting.Limit {
	return accounting.Limit{Name: "tenant-rps", Dimension: accounting.Requests, Scope: []string{"tenant"},
		Algorithm: accounting.FixedWindow, Limit: 1, Window: window, OnExhausted: accounting.OnExhausted{WaitUpTo: wait}}
}

var waitBody = []byte(`{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)

// TestWaitHoldsARefusedRequest: a request refused by a limit that waits
// is held, after asking Envoy for the time (one override_message_timeout
// of the wait plus the margin, which the shipped max_message_timeout
// takes), and admitted when the next window opens: the client gets a
// 200, not a 429.
func TestWaitHoldsARefusedRequest(t *testing.T) {
	// The store's clock starts half a second into a window, so the
	// second request is refused for about half a second, whenever the
	// test runs.
	t0, base := time.Now(), time.Unix(1_000_000, int64(500*time.Millisecond))
	store := memstore.New(memstore.Options{Now: func() time.Time { return base.Add(time.Since(t0)) }})
	reg := prometheus.NewRegistry()
	r := newRig(t, []accounting.Limit{waitingLimit(time.Second, 2*time.Second)}, withStore(store), withRegistry(reg))
	upstream := jsonUpstream(200, fixture(t, "openai/chat_response.json"))

	first := r.envoy.Do(t.Context(), chatRequest("a", waitBody), upstream)
	wantStatus(t, first, 200)
	if len(first.TimeoutOverrides) != 0 {
		t.Errorf("first: overrides %v, want none (it did not wait)", first.TimeoutOverrides)
	}
	second := r.envoy.Do(t.Context(), chatRequest("a", waitBody), upstream)
	wantStatus(t, second, 200)
	if want := 2*time.Second + accounting.WaitMargin; len(second.TimeoutOverrides) != 1 || second.TimeoutOverrides[0] != want {
		t.Errorf("second: overrides %v, want [%v]", second.TimeoutOverrides, want)
	}
	if len(second.IgnoredOverrides) != 0 {
		t.Errorf("second: ignored overrides %v, want none", second.IgnoredOverrides)
	}
	wantHeader(t, second.Header, "x-ratelimit-remaining-requests", "0")
	// The access log says how long each was held: the first not at all.
	if got, ok := first.Metadata[extproc.MetadataNamespace][extproc.MetaWaitSeconds]; ok {
		t.Errorf("first: %s %v, want none", extproc.MetaWaitSeconds, got)
	}
	if got, _ := second.Metadata[extproc.MetadataNamespace][extproc.MetaWaitSeconds].(float64); got <= 0 || got > 2 {
		t.Errorf("second: %s %v, want the wait, above 0 and at most 2s", extproc.MetaWaitSeconds, got)
	}
	r.envoy.Wait()
	if got := requestsTotal(t, reg, "admitted"); got != 2 {
		t.Errorf("requests_total{admitted}: got %v, want 2", got)
	}
	if got := requestsTotal(t, reg, "rejected"); got != 0 {
		t.Errorf("requests_total{rejected}: got %v, want 0", got)
	}
	if got := gathered(t, reg, "tokenwarden_waited_total", "admitted"); got != 1 {
		t.Errorf("waited_total{admitted}: got %v, want 1", got)
	}
}

// TestWaitBeyondMaxMessageTimeout: with a max_message_timeout below the
// wait plus the margin, Envoy ignores the override (and answers 504 when
// message_timeout passes: envoy/ checks that with the real Envoy).
func TestWaitBeyondMaxMessageTimeout(t *testing.T) {
	t0, base := time.Now(), time.Unix(1_000_000, int64(500*time.Millisecond))
	store := memstore.New(memstore.Options{Now: func() time.Time { return base.Add(time.Since(t0)) }})
	r := newRig(t, []accounting.Limit{waitingLimit(time.Second, 2*time.Second)}, withStore(store))
	r.envoy.Filter.MaxMessageTimeout = time.Second
	upstream := jsonUpstream(200, fixture(t, "openai/chat_response.json"))
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", waitBody), upstream), 200)
	second := r.envoy.Do(t.Context(), chatRequest("a", waitBody), upstream)
	if len(second.TimeoutOverrides) != 0 || len(second.IgnoredOverrides) != 1 {
		t.Errorf("overrides taken %v, ignored %v; want none taken, one ignored", second.TimeoutOverrides, second.IgnoredOverrides)
	}
}

// TestWaitClientLeaves: a client that disconnects while its request is
// held (Envoy cancels the stream) ends the wait at once: nothing is
// reserved, and the request is counted cancelled.
func TestWaitClientLeaves(t *testing.T) {
	// A frozen store clock 1ms into a 10s window: the held request
	// would wait almost 10s, unless it leaves.
	frozen := time.Unix(1_000_000, int64(time.Millisecond))
	store := memstore.New(memstore.Options{Now: func() time.Time { return frozen }})
	reg := prometheus.NewRegistry()
	r := newRig(t, []accounting.Limit{waitingLimit(10*time.Second, 10*time.Second)}, withStore(store), withRegistry(reg))
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", waitBody), jsonUpstream(200, fixture(t, "openai/chat_response.json"))), 200)

	// The second request, message by message, until the server asks
	// for time: it is then holding the request.
	ctx, disconnect := context.WithCancel(t.Context())
	stream, err := r.envoy.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	headers := &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
		{Key: ":method", RawValue: []byte("POST")}, {Key: ":path", RawValue: []byte("/v1/chat/completions")},
		{Key: "content-type", RawValue: []byte("application/json")}, {Key: "x-tenant-id", RawValue: []byte("a")},
	}}}
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: headers}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: waitBody, EndOfStream: true}}}); err != nil {
		t.Fatal(err)
	}
	held, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if d := held.GetOverrideMessageTimeout().AsDuration(); held.Response != nil || d != 10*time.Second+accounting.WaitMargin {
		t.Fatalf("reply to the body: got %v, want only override_message_timeout 11s", held)
	}
	if got := gathered(t, reg, "tokenwarden_waiting"); got != 1 {
		t.Errorf("waiting: got %v, want 1", got)
	}
	disconnect()
	r.envoy.Wait() // the handler has returned
	if got := requestsTotal(t, reg, "cancelled"); got != 1 {
		t.Errorf("requests_total{cancelled}: got %v, want 1", got)
	}
	if got := gathered(t, reg, "tokenwarden_waited_total", "cancelled"); got != 1 {
		t.Errorf("waited_total{cancelled}: got %v, want 1", got)
	}
	if got := gathered(t, reg, "tokenwarden_waiting"); got != 0 {
		t.Errorf("waiting: got %v after the client left, want 0", got)
	}
	if got := r.used(t, "tenant-rps", accounting.Attributes{{Name: "tenant", Value: "a"}}); got != 1 {
		t.Errorf("tenant-rps used: got %d, want 1 (the first request only)", got)
	}
}

// TestWaitHoldsACallThatIsNotAnLLMCall: a call counted on the requests
// dimension only (not an LLM API path, decided on its headers, with
// other paths counted) waits as
// an LLM call does, on the request headers message.
func TestWaitHoldsACallThatIsNotAnLLMCall(t *testing.T) {
	t0, base := time.Now(), time.Unix(1_000_000, int64(500*time.Millisecond))
	store := memstore.New(memstore.Options{Now: func() time.Time { return base.Add(time.Since(t0)) }})
	r := newRig(t, []accounting.Limit{waitingLimit(time.Second, 2*time.Second)}, withStore(store),
		withServer(func(o *extproc.Options) { o.CountOtherPaths = true }))
	req := envoytest.Request{Method: "GET", Path: "/v1/models", Headers: [][2]string{{"x-tenant-id", "a"}}}
	upstream := jsonUpstream(200, []byte(`{"data":[]}`))
	wantStatus(t, r.envoy.Do(t.Context(), req, upstream), 200)
	second := r.envoy.Do(t.Context(), req, upstream)
	wantStatus(t, second, 200)
	if len(second.TimeoutOverrides) != 1 || second.Upstream == nil {
		t.Errorf("second: overrides %v, upstream called %v; want one override, and the call made", second.TimeoutOverrides, second.Upstream != nil)
	}
}
