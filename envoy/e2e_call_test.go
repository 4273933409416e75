package envoy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// e2eCall is a request to the rig beyond send's defaults: another API's
// path, HTTP/2, request trailers, the token in another header.
type e2eCall struct {
	// path is the request path, query included (default
	// /v1/chat/completions). It is sent as written: percent-encoding is
	// kept.
	path string
	// h2 sends over cleartext HTTP/2 (h2c with prior knowledge), on a
	// connection of its own.
	h2 bool
	// trailer, when set, is sent as request trailers after the body. Over
	// HTTP/1.1 Envoy's codec drops them; over HTTP/2 they end the stream.
	trailer http.Header
	// tokenHeader carries the caller's token: "authorization" (as
	// "Bearer <token>", the default), "x-api-key" (Anthropic's SDKs) or
	// "x-goog-api-key" (Gemini's).
	tokenHeader string
	// headers are more request headers, name then value.
	headers []string
}

// Route headers that send a request down one of the rig's extra routes
// (see e2eRigRoutes).
var (
	// e2eRouteTimeout1s: a route with a 1 s timeout; Envoy answers 504
	// itself when the upstream is slower.
	e2eRouteTimeout1s = []string{"x-e2e-route", "timeout-1s"}
	// e2eRouteUnreachable: a route to a cluster nothing listens on; Envoy
	// answers 503 itself, the request never sent.
	e2eRouteUnreachable = []string{"x-e2e-route", "unreachable"}
)

// e2eUnreachable is the address of the rig's unreachable cluster: port 1 on
// loopback, privileged and unused, so a connection is refused at once.
const e2eUnreachable = "127.0.0.1:1"

// e2eRigRoutes adds the routes the e2e tests need to the rendered
// envoy.yaml, before its catch-all, and the cluster one of them goes to.
// The shipped config has one route, with a 600 s timeout (too long to wait
// for in a test of Envoy's own 504), to one reachable cluster.
func e2eRigRoutes(t *testing.T) func(doc map[string]any) {
	return func(doc map[string]any) {
		hcm := path(t, doc, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config")
		vh := named(t, path(t, hcm, "route_config", "virtual_hosts"), "llm")
		route := func(header []string, action map[string]any) map[string]any {
			return map[string]any{
				"match": map[string]any{
					"prefix":  "/",
					"headers": []any{map[string]any{"name": header[0], "string_match": map[string]any{"exact": header[1]}}},
				},
				"route": action,
			}
		}
		vh["routes"] = append([]any{
			route(e2eRouteTimeout1s, map[string]any{"cluster": upstreamCluster, "timeout": "1s"}),
			route(e2eRouteUnreachable, map[string]any{"cluster": "e2e-unreachable"}),
		}, vh["routes"].([]any)...)
		res := path(t, doc, "static_resources").(map[string]any)
		res["clusters"] = append(res["clusters"].([]any), map[string]any{
			"name": "e2e-unreachable", "type": "STATIC", "connect_timeout": "1s",
			"load_assignment": map[string]any{
				"cluster_name": "e2e-unreachable",
				"endpoints": []any{map[string]any{"lb_endpoints": []any{map[string]any{
					"endpoint": map[string]any{"address": map[string]any{"socket_address": socketAddress(t, e2eUnreachable)}},
				}}}},
			},
		})
	}
}

// do sends body as c with the options of call and returns the whole
// response. tag, when not empty, goes into the query string, where
// accessLogLine finds the request's access log line.
func (r *e2eRig) do(t *testing.T, c e2eCaller, body []byte, tag string, call e2eCall) (*e2eResponse, error) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: 5 * time.Second}
	if call.h2 {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		tr = &http.Transport{Protocols: p}
		t.Cleanup(tr.CloseIdleConnections)
	}
	resp, err := r.openCall(t, t.Context(), tr, c, body, tag, call)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the response body: %w", err)
	}
	return &e2eResponse{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// mustDo is do that fails the test on a transport error.
func (r *e2eRig) mustDo(t *testing.T, c e2eCaller, body []byte, tag string, call e2eCall) *e2eResponse {
	t.Helper()
	resp, err := r.do(t, c, body, tag, call)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// openCall sends the request with the given transport and returns the
// response with its body unread.
func (r *e2eRig) openCall(t *testing.T, ctx context.Context, tr *http.Transport, c e2eCaller, body []byte, tag string, call e2eCall) (*http.Response, error) {
	t.Helper()
	p := call.path
	if p == "" {
		p = "/v1/chat/completions"
	}
	if tag != "" {
		sep := "?"
		if strings.Contains(p, "?") {
			sep = "&"
		}
		p += sep + "tag=" + tag
	}
	// NewRequest keeps an escaped path as written (URL.RawPath).
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.listen+p, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := req.URL.EscapedPath(); !strings.HasPrefix(p, got) {
		t.Fatalf("path %q would be sent as %q", p, got)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		switch call.tokenHeader {
		case "", "authorization":
			req.Header.Set("Authorization", "Bearer "+c.token)
		default:
			req.Header.Set(call.tokenHeader, c.token)
		}
	}
	if len(call.headers)%2 != 0 {
		t.Fatalf("headers: odd number of arguments %q", call.headers)
	}
	for i := 0; i < len(call.headers); i += 2 {
		req.Header.Set(call.headers[i], call.headers[i+1])
	}
	if call.trailer != nil {
		req.Trailer = call.trailer.Clone()
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	return client.Do(req)
}
