package extproc_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// rig is a server on a memory store behind the test Envoy.
type rig struct {
	envoy   *envoytest.Envoy
	limiter *accounting.Limiter
	store   accounting.Store
}

type rigOption func(*extproc.Options, *accounting.Options)

func withStore(s accounting.Store) rigOption {
	return func(_ *extproc.Options, a *accounting.Options) { a.Store = s }
}

func withServer(f func(*extproc.Options)) rigOption {
	return func(o *extproc.Options, _ *accounting.Options) { f(o) }
}

// tenantIdentity reads tenant and user from headers; tenant is required.
var tenantIdentity = extproc.Identity{
	Attributes: []extproc.AttributeSource{
		{Name: "tenant", Header: "x-tenant-id"},
		{Name: "user", Header: "x-user-id"},
	},
	Required: []string{"tenant"},
}

func newRig(t *testing.T, limits []accounting.Limit, opts ...rigOption) *rig {
	t.Helper()
	ao := accounting.Options{
		Store:  memstore.New(memstore.Options{}),
		Limits: limits,
		Prices: accounting.Prices{"gpt-4o-mini": {Input: 0.15, CachedInput: 0.075, Output: 0.60}, "default": {Input: 5, Output: 15}},
	}
	so := extproc.Options{
		Identity:          tenantIdentity,
		DefaultOutputCap:  1000,
		InjectOutputCap:   true,
		InjectStreamUsage: true,
	}
	for _, o := range opts {
		o(&so, &ao)
	}
	lim, err := accounting.New(ao)
	if err != nil {
		t.Fatalf("accounting.New: %v", err)
	}
	so.Limiter = lim
	srv, err := extproc.NewServer(so)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	return &rig{envoy: envoytest.Start(t, srv, srv.ServerOptions()...), limiter: lim, store: ao.Store}
}

// used returns how much of limit name's counter for attrs is used, by
// asking the store for zero more.
func (r *rig) used(t *testing.T, name string, attrs accounting.Attributes) int64 {
	t.Helper()
	for _, l := range r.limiter.Limits() {
		if l.Name != name {
			continue
		}
		res, err := r.store.Reserve(context.Background(), accounting.ReserveRequest{
			ID: "probe", Items: []accounting.ReserveItem{{Counter: l.Counter(attrs), Amount: 0}},
		})
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		return l.Capacity() - res.States[0].Remaining
	}
	t.Fatalf("no limit %q", name)
	return 0
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tokensLimit(name string, limit int64, scope ...string) accounting.Limit {
	return accounting.Limit{Name: name, Dimension: accounting.Tokens, Scope: scope,
		Algorithm: accounting.FixedWindow, Limit: limit, Window: time.Hour}
}

func chatRequest(tenant string, body []byte) envoytest.Request {
	return envoytest.Request{
		Path:    "/v1/chat/completions",
		Headers: [][2]string{{"content-type", "application/json"}, {"x-tenant-id", tenant}},
		Body:    body,
	}
}

// jsonUpstream answers with a JSON body.
func jsonUpstream(status int, body []byte, extra ...[2]string) envoytest.Upstream {
	return func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		h := append([][2]string{{"content-type", "application/json"}}, extra...)
		return envoytest.UpstreamResponse{Status: status, Headers: h, Chunks: [][]byte{body}}
	}
}

// sseUpstream streams body in chunks of size n.
func sseUpstream(body []byte, n int, cutAfter int) envoytest.Upstream {
	return func(*envoytest.UpstreamRequest) envoytest.UpstreamResponse {
		var chunks [][]byte
		for len(body) > 0 {
			k := min(n, len(body))
			chunks = append(chunks, body[:k])
			body = body[k:]
		}
		return envoytest.UpstreamResponse{Status: 200, Headers: [][2]string{{"content-type", "text/event-stream; charset=utf-8"}},
			Chunks: chunks, CutAfter: cutAfter}
	}
}

func wantStatus(t *testing.T, resp *envoytest.Response, want int) {
	t.Helper()
	if resp.Err != nil {
		t.Fatalf("filter failed: %v", resp.Err)
	}
	if resp.Status != want {
		t.Fatalf("status: got %d, want %d (body %s)", resp.Status, want, resp.Body)
	}
}

func wantHeader(t *testing.T, h http.Header, key, want string) {
	t.Helper()
	if got := h.Values(key); len(got) != 1 || got[0] != want {
		t.Errorf("header %s: got %q, want [%q]", key, got, want)
	}
}

func compact(b []byte) []byte { return bytes.TrimSpace(b) }

func memStore() accounting.Store { return memstore.New(memstore.Options{}) }

// gathered returns the value of a counter or gauge in reg, of the child
// with the given label values (in label order).
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for i, lp := range m.GetLabel() {
				if i >= len(labels) || lp.GetValue() != labels[i] {
					continue metric
				}
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
