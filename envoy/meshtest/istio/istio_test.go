package istio

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extproc "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/networking/core"
	"istio.io/istio/pilot/test/xdstest"
)

// The names the shipped files and this test share.
const (
	llmHost   = "llm.example.com"
	appHost   = "app.example.com"
	otherHost = "status.example.com" // a second host on the LLM gateway
	extProc   = "envoy.filters.http.ext_proc"
	strip     = "tokenwarden.strip-identity"
	jwtAuthn  = "envoy.filters.http.jwt_authn"
	router    = "envoy.filters.http.router"
	twCluster = "outbound|50051||tokenwarden.tokenwarden.svc.cluster.local"
)

// mesh is what a platform team has besides tokenwarden's files: a gateway
// for the LLM host (the pods labelled istio: llm-gateway; the same gateway
// also serves a status page) and the shared ingress gateway (istio:
// ingressgateway) serving another application, their VirtualServices, and
// the Services they route to, tokenwarden's among them.
const mesh = `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: llm, namespace: istio-system}
spec:
  selector: {istio: llm-gateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [` + llmHost + `, ` + otherHost + `]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: apps, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [` + appHost + `]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: llm, namespace: llm}
spec:
  hosts: [` + llmHost + `]
  gateways: [istio-system/llm]
  http:
  - route: [{destination: {host: llm-upstream.llm.svc.cluster.local, port: {number: 8081}}}]
    timeout: 600s
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: status, namespace: llm}
spec:
  hosts: [` + otherHost + `]
  gateways: [istio-system/llm]
  http:
  - route: [{destination: {host: status.llm.svc.cluster.local, port: {number: 80}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: app, namespace: app}
spec:
  hosts: [` + appHost + `]
  gateways: [istio-system/apps]
  http:
  - route: [{destination: {host: app.app.svc.cluster.local, port: {number: 80}}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: tokenwarden, namespace: tokenwarden}
spec:
  hosts: [tokenwarden.tokenwarden.svc.cluster.local]
  ports: [{number: 50051, name: grpc, protocol: GRPC}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: llm-upstream, namespace: llm}
spec:
  hosts: [llm-upstream.llm.svc.cluster.local, status.llm.svc.cluster.local]
  ports: [{number: 8081, name: http, protocol: HTTP}, {number: 80, name: http-status, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: app, namespace: app}
spec:
  hosts: [app.app.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.3}]
`

// gatewayConfig is what istiod sends one gateway: its HTTP connection
// managers (one per filter chain) and route configurations.
type gatewayConfig struct {
	hcms   []*hcm.HttpConnectionManager
	routes []*route.RouteConfiguration
}

// generate runs Istio's config generation for a gateway proxy with the
// given istio label, on the mesh and the shipped files.
func generate(t *testing.T, label string) gatewayConfig {
	t.Helper()
	shipped, err := os.ReadFile("../../istio/envoyfilter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cg := core.NewConfigGenTest(t, core.TestOptions{ConfigString: mesh + "\n---\n" + withInlineJWKS(t, string(shipped))})
	proxy := cg.SetupProxy(&model.Proxy{
		Type:            model.Router,
		Labels:          map[string]string{"istio": label},
		Metadata:        &model.NodeMetadata{Labels: map[string]string{"istio": label}, Namespace: "istio-system"},
		ConfigNamespace: "istio-system",
	})
	listeners := cg.Listeners(proxy)
	var gc gatewayConfig
	for _, l := range listeners {
		for _, fc := range l.GetFilterChains() {
			if h := xdstest.ExtractHTTPConnectionManager(t, fc); h != nil {
				gc.hcms = append(gc.hcms, h)
			}
		}
	}
	if len(gc.hcms) == 0 {
		t.Fatalf("gateway %s: no HTTP connection manager in %v", label, xdstest.ExtractListenerNames(listeners))
	}
	gc.routes = cg.RoutesFromListeners(proxy, listeners)
	return gc
}

// withInlineJWKS gives the shipped RequestAuthentication the demo key set
// inline (envoy/envoy.yaml's), in place of its issuer's jwksUri: istiod
// would fetch that URI, and this test reaches no network.
func withInlineJWKS(t *testing.T, shipped string) string {
	t.Helper()
	bootstrap, err := os.ReadFile("../../envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`inline_string: '(\{"keys".*\})'`).FindSubmatch(bootstrap)
	if m == nil {
		t.Fatal("envoy/envoy.yaml: no inline JWKS")
	}
	const uri = "jwksUri: https://issuer.example.com/.well-known/jwks.json"
	if !strings.Contains(shipped, uri) {
		t.Fatalf("the RequestAuthentication has no %q", uri)
	}
	return strings.Replace(shipped, uri, "jwks: '"+string(m[1])+"'", 1)
}

// filterNames returns an HTTP connection manager's filters, in order.
func filterNames(h *hcm.HttpConnectionManager) []string {
	var names []string
	for _, f := range h.GetHttpFilters() {
		names = append(names, f.GetName())
	}
	return names
}

// virtualHost returns the virtual host of a host on port 80.
func virtualHost(t *testing.T, gc gatewayConfig, host string) *route.VirtualHost {
	t.Helper()
	for _, rc := range gc.routes {
		for _, vh := range rc.GetVirtualHosts() {
			if slices.Contains(vh.GetDomains(), host) {
				return vh
			}
		}
	}
	t.Fatalf("no virtual host for %s", host)
	return nil
}

// TestLLMGateway: on the LLM gateway, every HTTP connection manager strips
// the client's identity headers first, verifies the JWT, then asks
// tokenwarden (ext_proc, with its contract's processing mode, on the
// tokenwarden Service's cluster) just before the router; the LLM host's
// virtual host buffers 48 MiB bodies and removes the identity headers and
// accept-encoding before the provider. The gateway's other host gets
// neither: the virtual-host patch is matched to the LLM host.
func TestLLMGateway(t *testing.T) {
	gc := generate(t, "llm-gateway")
	for i, h := range gc.hcms {
		names := filterNames(h)
		is, ij, ie, ir := slices.Index(names, strip), slices.Index(names, jwtAuthn), slices.Index(names, extProc), slices.Index(names, router)
		if is != 0 || ij < 0 || ie < 0 || ir < 0 || !(is < ij && ij < ie && ie == ir-1) {
			t.Errorf("connection manager %d filters %v: want %s first, then %s, then %s just before %s", i, names, strip, jwtAuthn, extProc, router)
		}
		for _, f := range h.GetHttpFilters() {
			if f.GetName() != extProc {
				continue
			}
			var ep extproc.ExternalProcessor
			if err := f.GetTypedConfig().UnmarshalTo(&ep); err != nil {
				t.Fatal(err)
			}
			if got := ep.GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != twCluster {
				t.Errorf("ext_proc cluster: got %s, want %s", got, twCluster)
			}
			pm := ep.GetProcessingMode()
			if pm.GetRequestBodyMode() != extproc.ProcessingMode_BUFFERED || pm.GetResponseBodyMode() != extproc.ProcessingMode_STREAMED ||
				ep.GetFailureModeAllow() || !ep.GetAllowModeOverride() {
				t.Errorf("ext_proc: got %v, fail open %v, mode override %v; want BUFFERED/STREAMED, closed, allowed", pm, ep.GetFailureModeAllow(), ep.GetAllowModeOverride())
			}
			if f.GetDisabled() {
				t.Error("ext_proc is disabled on the LLM gateway")
			}
		}
	}

	llm := virtualHost(t, gc, llmHost)
	if got := llm.GetRequestBodyBufferLimit().GetValue(); got != 48<<20 {
		t.Errorf("%s request_body_buffer_limit: got %d, want %d", llmHost, got, 48<<20)
	}
	for _, h := range []string{"x-tenant-id", "x-user-id", "x-tier", "accept-encoding", "x-tokenwarden-model"} {
		if !slices.Contains(llm.GetRequestHeadersToRemove(), h) {
			t.Errorf("%s request_headers_to_remove %v: want %s among them", llmHost, llm.GetRequestHeadersToRemove(), h)
		}
	}
	other := virtualHost(t, gc, otherHost)
	if other.GetRequestBodyBufferLimit() != nil || len(other.GetRequestHeadersToRemove()) != 0 {
		t.Errorf("%s, the LLM gateway's other host: buffer limit %v, headers removed %v; want neither", otherHost,
			other.GetRequestBodyBufferLimit(), other.GetRequestHeadersToRemove())
	}
}

// TestSharedGatewayUntouched: the shared ingress gateway, and the other
// application on it, get nothing of tokenwarden's: no ext_proc, no header
// strip, no body buffer, no header removal.
func TestSharedGatewayUntouched(t *testing.T) {
	gc := generate(t, "ingressgateway")
	for i, h := range gc.hcms {
		for _, name := range filterNames(h) {
			if name == extProc || name == strip || strings.HasPrefix(name, "tokenwarden") {
				t.Errorf("connection manager %d of the shared gateway has %s: %v", i, name, filterNames(h))
			}
		}
	}
	app := virtualHost(t, gc, appHost)
	if app.GetRequestBodyBufferLimit() != nil || len(app.GetRequestHeadersToRemove()) != 0 {
		t.Errorf("%s: buffer limit %v, headers removed %v; want neither", appHost, app.GetRequestBodyBufferLimit(), app.GetRequestHeadersToRemove())
	}
}
