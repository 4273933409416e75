package envoy

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// e2eAppCluster is the cluster of the rig's second application: a route
// on the same listener and virtual host as the LLM routes, to an
// upstream that is not an LLM (see e2eAppRoute).
const (
	e2eAppCluster = "e2e-app"
	e2eAppPrefix  = "/app/"
)

// e2eApp is a plain HTTP application behind the rig's Envoy: it answers
// every request with what it received, and keeps each request by its
// tag query parameter.
type e2eApp struct {
	srv  *http.Server
	addr string

	mu   sync.Mutex
	seen map[string]e2eAppRequest
}

// e2eAppRequest is a request as the application got it.
type e2eAppRequest struct {
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Header http.Header `json:"header"`
	Body   string      `json:"body"`
}

// startE2EApp starts the application on a free loopback port.
func startE2EApp() (*e2eApp, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &e2eApp{addr: ln.Addr().String(), seen: map[string]e2eAppRequest{}}
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		got := e2eAppRequest{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Body: string(b)}
		a.mu.Lock()
		a.seen[req.URL.Query().Get("tag")] = got
		a.mu.Unlock()
		// A header tokenwarden removes from the responses it processes
		// (a provider's account-wide figure): it reaches the client only
		// if tokenwarden left the response alone.
		w.Header().Set("x-ratelimit-remaining-requests", "7")
		w.Header().Set("content-type", "application/json")
		json.NewEncoder(w).Encode(got)
	})}
	go a.srv.Serve(ln)
	return a, nil
}

func (a *e2eApp) request(tag string) (e2eAppRequest, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.seen[tag]
	return r, ok
}

func (a *e2eApp) stop() {
	if a != nil {
		a.srv.Close()
	}
}

// e2eAppRoute adds the second application's route to the rendered
// envoy.yaml, before its catch-all: /app/ on the same listener, virtual
// host and filter chain as the LLM routes, to the application's cluster.
func e2eAppRoute(t *testing.T, addr string) func(doc map[string]any) {
	return func(doc map[string]any) {
		hcm := path(t, doc, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config")
		vh := named(t, path(t, hcm, "route_config", "virtual_hosts"), "llm")
		vh["routes"] = append([]any{map[string]any{
			"match": map[string]any{"prefix": e2eAppPrefix},
			"route": map[string]any{"cluster": e2eAppCluster},
		}}, vh["routes"].([]any)...)
		res := path(t, doc, "static_resources").(map[string]any)
		res["clusters"] = append(res["clusters"].([]any), map[string]any{
			"name": e2eAppCluster, "type": "STATIC", "connect_timeout": "1s",
			"load_assignment": map[string]any{
				"cluster_name": e2eAppCluster,
				"endpoints": []any{map[string]any{"lb_endpoints": []any{map[string]any{
					"endpoint": map[string]any{"address": map[string]any{"socket_address": socketAddress(t, addr)}},
				}}}},
			},
		})
	}
}

// TestE2EOtherApplicationPassesUntouched: through the real Envoy 1.40, a
// second application's route on the listener and filter chain of the
// LLM routes — as a filter applied to a whole gateway reaches it — is
// left alone by tokenwarden: a request without any token reaches the
// application with its body, and its response reaches the client with
// the application's own headers; a caller's requests there count against
// none of its limits; tokenwarden writes no metadata for them. The LLM
// route beside it still needs an identity and counts.
func TestE2EOtherApplicationPassesUntouched(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	c := newE2ECaller(t)
	chat := e2eChat(t, "Hello there.", 50, false)
	first := r.mustSend(t, c, chat, "", e2eFixedUsage...)
	e2eWantStatus(t, first, http.StatusOK)
	before := e2eIntHeader(t, first, "x-ratelimit-remaining-requests")

	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"an order, not an LLM call"}]}`
	for _, caller := range []struct {
		name string
		c    e2eCaller
	}{{"no token", e2eCaller{}}, {"a caller's token", c}} {
		tag := c.tenant + "-app-" + strings.ReplaceAll(caller.name, " ", "-")
		resp := r.mustDo(t, caller.c, []byte(body), tag, e2eCall{path: e2eAppPrefix + "orders"})
		e2eWantStatus(t, resp, http.StatusOK)
		got, ok := r.app.request(tag)
		if !ok {
			t.Fatalf("%s: the application never got the request", caller.name)
		}
		if got.Body != body || got.Path != e2eAppPrefix+"orders" {
			t.Errorf("%s: the application got %s %q, want %s %q", caller.name, got.Path, got.Body, e2eAppPrefix+"orders", body)
		}
		if v := resp.header.Get("x-ratelimit-remaining-requests"); v != "7" {
			t.Errorf("%s: x-ratelimit-remaining-requests: got %q, want the application's 7", caller.name, v)
		}
		line := accessLogLine(t, r.envoy.stdout, tag)
		for _, k := range []string{"tw_api", "tw_reservation", "tw_settled_on"} {
			if line[k] != nil {
				t.Errorf("%s: access log %s: got %v, want none (tokenwarden wrote nothing)", caller.name, k, line[k])
			}
		}
	}

	next := r.mustSend(t, c, chat, "", e2eFixedUsage...)
	e2eWantStatus(t, next, http.StatusOK)
	if got := e2eIntHeader(t, next, "x-ratelimit-remaining-requests"); got != before-1 {
		t.Errorf("remaining requests after two application requests: got %d, want %d (only the LLM call counts)", got, before-1)
	}
	if resp := r.mustDo(t, e2eCaller{}, chat, "", e2eCall{}); resp.status != http.StatusUnauthorized {
		t.Errorf("the LLM route without a token: got %d, want 401", resp.status)
	}
}
