package extproc_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// reloadRig is a server behind the test Envoy that a test reloads.
type reloadRig struct {
	envoy *envoytest.Envoy
	srv   *extproc.Server
	root  *accounting.Limiter
	store accounting.Store
}

var reloadPrices = accounting.Prices{"default": {Input: 5, Output: 15}}

func newReloadRig(t *testing.T, limits ...accounting.Limit) *reloadRig {
	t.Helper()
	store := memStore()
	lim, err := accounting.New(accounting.Options{Store: store, Limits: limits, Prices: reloadPrices})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := extproc.NewServer(extproc.Options{Limiter: lim, Identity: tenantIdentity, DefaultOutputCap: 1000,
		InjectOutputCap: true, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return &reloadRig{envoy: envoytest.Start(t, srv, srv.ServerOptions()...), srv: srv, root: lim, store: store}
}

// reload makes limits and identity the server's.
func (r *reloadRig) reload(t testing.TB, id extproc.Identity, limits ...accounting.Limit) {
	lim, err := r.root.Reconfigure(accounting.Options{Limits: limits, Prices: reloadPrices})
	if err != nil {
		t.Error(err)
		return
	}
	if err := r.srv.Reload(extproc.Options{Limiter: lim, Identity: id, DefaultOutputCap: 1000, InjectOutputCap: true}); err != nil {
		t.Error(err)
	}
}

// used returns what limit's counter for attrs holds.
func (r *reloadRig) used(t *testing.T, l accounting.Limit, attrs accounting.Attributes) int64 {
	t.Helper()
	res, err := r.store.Reserve(context.Background(), accounting.ReserveRequest{
		ID: "probe", Items: []accounting.ReserveItem{{Counter: l.Counter(attrs), Amount: 0}},
	})
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	return l.Capacity() - res.States[0].Remaining
}

// teamIdentity reads the tenant from another header than tenantIdentity.
var teamIdentity = extproc.Identity{
	Attributes: []extproc.AttributeSource{{Name: "tenant", Header: "x-team-id"}},
	Required:   []string{"tenant"},
}

// TestReloadInFlight: a request admitted before a reload settles on the
// limits it was admitted under, also a limit the reload removed; the
// requests after it run wholly on the new options.
func TestReloadInFlight(t *testing.T) {
	onlyA := tokensLimit("only-in-a", 1_000_000, "tenant")
	onlyB := tokensLimit("only-in-b", 1_000_000, "tenant")
	r := newReloadRig(t, onlyA)

	// The reload happens while the upstream answers: after admission,
	// before settlement.
	upstream := jsonUpstream(200, fixture(t, "openai/chat_response.json"))
	resp := r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")),
		func(u *envoytest.UpstreamRequest) envoytest.UpstreamResponse {
			r.reload(t, teamIdentity, onlyB)
			return upstream(u)
		})
	wantStatus(t, resp, 200)
	// 1163 tokens of usage, in place of the estimate (~3950).
	if got := r.used(t, onlyA, tenantA); got != 1163 {
		t.Errorf("only-in-a after the in-flight request: got %d, want 1163 (its usage)", got)
	}
	if got := r.used(t, onlyB, tenantA); got != 0 {
		t.Errorf("only-in-b after the in-flight request: got %d, want 0", got)
	}

	// After the reload the tenant comes from x-team-id: x-tenant-id
	// alone is now unauthenticated.
	resp = r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")), upstream)
	wantStatus(t, resp, 401)
	req := chatRequest("a", fixture(t, "openai/chat_request.json"))
	req.Headers = [][2]string{{"content-type", "application/json"}, {"x-team-id", "a"}}
	resp = r.envoy.Do(t.Context(), req, upstream)
	wantStatus(t, resp, 200)
	if got := r.used(t, onlyB, tenantA); got != 1163 {
		t.Errorf("only-in-b after a request under B: got %d, want 1163", got)
	}
	if got := r.used(t, onlyA, tenantA); got != 1163 {
		t.Errorf("only-in-a after a request under B: got %d, want still 1163", got)
	}
}

// TestReloadRefused: options NewServer would refuse, a missing limiter
// or one on another store change nothing.
func TestReloadRefused(t *testing.T) {
	onlyA := tokensLimit("only-in-a", 1_000_000, "tenant")
	r := newReloadRig(t, onlyA)
	other, err := accounting.New(accounting.Options{Store: memStore()})
	if err != nil {
		t.Fatal(err)
	}
	ok, err := r.root.Reconfigure(accounting.Options{Prices: reloadPrices})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    extproc.Options
		wantErr string
	}{
		{name: "no limiter", opts: extproc.Options{Identity: teamIdentity}, wantErr: "no limiter"},
		{name: "other store", opts: extproc.Options{Limiter: other, Identity: teamIdentity}, wantErr: "store"},
		{name: "invalid options", opts: extproc.Options{Limiter: ok, Identity: teamIdentity, DefaultOutputCap: extproc.MaxOutputCap + 1},
			wantErr: "default_output_cap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.srv.Reload(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
			}
			// Still tenantIdentity and only-in-a.
			before := r.used(t, onlyA, tenantA)
			wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", fixture(t, "openai/chat_request.json")),
				jsonUpstream(200, fixture(t, "openai/chat_response.json"))), 200)
			if got := r.used(t, onlyA, tenantA) - before; got != 1163 {
				t.Errorf("only-in-a charged: got %d, want 1163", got)
			}
		})
	}
}

// TestReloadUnderLoad: many concurrent requests while the server flips
// between two configs: none fails, each settles exactly once on the
// limits it was admitted under. A limit in both configs holds every
// request's usage; each request was admitted under one config, so the
// two limits that only one config has hold all of it between them.
func TestReloadUnderLoad(t *testing.T) {
	shared := tokensLimit("shared", 1<<40, "tenant")
	onlyA := tokensLimit("only-in-a", 1<<40, "tenant")
	onlyB := tokensLimit("only-in-b", 1<<40, "tenant")
	r := newReloadRig(t, shared, onlyA)

	const workers, perWorker = 8, 25
	body := fixture(t, "openai/chat_request.json")
	upstream := jsonUpstream(200, fixture(t, "openai/chat_response.json"))
	var failed atomic.Int32
	var done sync.WaitGroup
	// The load starts once the first reload is in: at least one swap
	// happens under load however the goroutines are scheduled.
	started := make(chan struct{})
	for range workers {
		done.Go(func() {
			<-started
			for range perWorker {
				resp := r.envoy.Do(context.Background(), chatRequest("a", body), upstream)
				if resp.Err != nil || resp.Status != 200 {
					failed.Add(1)
					t.Errorf("request failed: status %d, err %v, body %s", resp.Status, resp.Err, resp.Body)
				}
			}
		})
	}
	stop := make(chan struct{})
	reloads := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				reloads <- n
				return
			default:
			}
			if n%2 == 0 {
				r.reload(t, tenantIdentity, shared, onlyB)
			} else {
				r.reload(t, tenantIdentity, shared, onlyA)
			}
			if n++; n == 1 {
				close(started)
			}
		}
	}()
	done.Wait()
	close(stop)
	n := <-reloads
	r.envoy.Wait()

	t.Logf("%d requests, %d reloads", workers*perWorker, n)
	if failed.Load() > 0 {
		t.Fatalf("%d requests failed", failed.Load())
	}
	want := int64(workers * perWorker * 1163)
	if got := r.used(t, shared, tenantA); got != want {
		t.Errorf("shared limit: got %d tokens, want %d (every request's usage, once)", got, want)
	}
	a, b := r.used(t, onlyA, tenantA), r.used(t, onlyB, tenantA)
	if a+b != want {
		t.Errorf("only-in-a + only-in-b: got %d + %d = %d, want %d", a, b, a+b, want)
	}
}

// TestReloadKeepsLearnedOutput: a reload that leaves the learned-output
// settings as they were keeps what the server has learned, and one that
// changes them starts over; either way the estimates, and the requests,
// count in the collectors the server registered at start.
func TestReloadKeepsLearnedOutput(t *testing.T) {
	reg := prometheus.NewRegistry()
	limits := []accounting.Limit{tokensLimit("tenant-tokens", 1_000_000, "tenant")}
	learning := extproc.LearnedOutput{Enabled: true, MinSamples: 5, Floor: 16}
	lim, err := accounting.New(accounting.Options{Store: memStore(), Limits: limits, Prices: reloadPrices})
	if err != nil {
		t.Fatal(err)
	}
	opts := extproc.Options{Limiter: lim, Identity: tenantIdentity, InjectOutputCap: true, DefaultOutputCap: 1000, LearnedOutput: learning}
	withReg := opts
	withReg.Registerer = reg
	srv, err := extproc.NewServer(withReg)
	if err != nil {
		t.Fatal(err)
	}
	envoy := envoytest.Start(t, srv, srv.ServerOptions()...)
	do := func() int64 {
		t.Helper()
		resp := envoy.Do(t.Context(), chatRequest("a", learnedChat), completion(20))
		wantStatus(t, resp, 200)
		return reservedTokens(t, resp)
	}
	var first int64
	for range 5 {
		first = do()
	}
	input := first - 1000

	if err := srv.Reload(opts); err != nil {
		t.Fatal(err)
	}
	if got, want := do(), input+20; got != want {
		t.Errorf("reserved after a reload with the same settings: got %d, want %d (the learned 20 kept)", got, want)
	}
	if got := gathered(t, reg, "tokenwarden_learned_output_requests_total", "learned"); got != 1 {
		t.Errorf(`requests_total{estimate="learned"} after the reload: got %v, want 1`, got)
	}

	changed := opts
	changed.LearnedOutput.Quantile = 0.5
	if err := srv.Reload(changed); err != nil {
		t.Fatal(err)
	}
	if got := do(); got != first {
		t.Errorf("reserved after a reload that changes the quantile: got %d, want %d (the cap: warming up again)", got, first)
	}
	if got := gathered(t, reg, "tokenwarden_learned_output_requests_total", "warming"); got != 6 {
		t.Errorf(`requests_total{estimate="warming"} after the second reload: got %v, want 6`, got)
	}
	if got := gathered(t, reg, "tokenwarden_learned_output_keys"); got != 1 {
		t.Errorf("tokenwarden_learned_output_keys: got %v, want 1 (the new estimator's)", got)
	}
	// The server's own collectors count across reloads too.
	if got := gathered(t, reg, "tokenwarden_requests_total", "openai.chat", "admitted"); got != 7 {
		t.Errorf(`requests_total{api="openai.chat",outcome="admitted"} after two reloads: got %v, want 7`, got)
	}
}
