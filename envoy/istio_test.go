package envoy

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	headermutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"
)

// decodeStrict decodes a parsed YAML document into v, failing on fields v does
// not declare. The Istio and Envoy Gateway structs in these tests declare the
// fields of their CRDs that the shipped files may use (taken from istio/api and
// envoyproxy/gateway's api/v1alpha1), so a misspelt field fails here rather
// than being dropped by the API server.
func decodeStrict(doc map[string]any, v any) error {
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// objectMeta is the part of Kubernetes metadata the manifests use.
type objectMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// istioEnvoyFilter is networking.istio.io/v1alpha3 EnvoyFilter
// (istio/api networking/v1alpha3/envoy_filter.proto).
type istioEnvoyFilter struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		WorkloadSelector *struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"workloadSelector"`
		Priority      int `yaml:"priority"`
		ConfigPatches []struct {
			ApplyTo string `yaml:"applyTo"`
			Match   struct {
				Context  string `yaml:"context"`
				Listener *struct {
					PortNumber  int    `yaml:"portNumber"`
					Name        string `yaml:"name"`
					FilterChain *struct {
						Name   string `yaml:"name"`
						Sni    string `yaml:"sni"`
						Filter *struct {
							Name      string `yaml:"name"`
							SubFilter *struct {
								Name string `yaml:"name"`
							} `yaml:"subFilter"`
						} `yaml:"filter"`
					} `yaml:"filterChain"`
				} `yaml:"listener"`
				RouteConfiguration *struct {
					PortNumber int    `yaml:"portNumber"`
					PortName   string `yaml:"portName"`
					Gateway    string `yaml:"gateway"`
					Name       string `yaml:"name"`
					Vhost      *struct {
						Name string `yaml:"name"`
					} `yaml:"vhost"`
				} `yaml:"routeConfiguration"`
			} `yaml:"match"`
			Patch struct {
				Operation   string         `yaml:"operation"`
				Value       map[string]any `yaml:"value"`
				FilterClass string         `yaml:"filterClass"`
			} `yaml:"patch"`
		} `yaml:"configPatches"`
	} `yaml:"spec"`
}

// istioRequestAuthentication is security.istio.io/v1 RequestAuthentication
// (istio/api security/v1beta1/request_authentication.proto).
type istioRequestAuthentication struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		Selector *struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		JwtRules []struct {
			Issuer                string   `yaml:"issuer"`
			Audiences             []string `yaml:"audiences"`
			JwksURI               string   `yaml:"jwksUri"`
			Jwks                  string   `yaml:"jwks"`
			ForwardOriginalToken  bool     `yaml:"forwardOriginalToken"`
			OutputPayloadToHeader string   `yaml:"outputPayloadToHeader"`
			OutputClaimToHeaders  []struct {
				Header string `yaml:"header"`
				Claim  string `yaml:"claim"`
			} `yaml:"outputClaimToHeaders"`
		} `yaml:"jwtRules"`
	} `yaml:"spec"`
}

// Enum values of the EnvoyFilter fields the file uses (envoy_filter.proto).
var (
	istioApplyTo = []string{"LISTENER", "FILTER_CHAIN", "NETWORK_FILTER", "HTTP_FILTER", "ROUTE_CONFIGURATION",
		"VIRTUAL_HOST", "HTTP_ROUTE", "CLUSTER", "EXTENSION_CONFIG", "BOOTSTRAP", "LISTENER_FILTER"}
	istioContexts   = []string{"ANY", "SIDECAR_INBOUND", "SIDECAR_OUTBOUND", "GATEWAY", "WAYPOINT"}
	istioOperations = []string{"MERGE", "ADD", "REMOVE", "INSERT_BEFORE", "INSERT_AFTER", "INSERT_FIRST", "REPLACE"}
)

// istioDocs decodes the Istio manifests strictly, by kind.
func istioDocs(t *testing.T) (*istioEnvoyFilter, *istioRequestAuthentication) {
	t.Helper()
	var ef *istioEnvoyFilter
	var ra *istioRequestAuthentication
	for _, doc := range yamlDocs(t, readFile(t, "istio/envoyfilter.yaml")) {
		var err error
		switch doc["kind"] {
		case "EnvoyFilter":
			ef = &istioEnvoyFilter{}
			err = decodeStrict(doc, ef)
		case "RequestAuthentication":
			ra = &istioRequestAuthentication{}
			err = decodeStrict(doc, ra)
		default:
			t.Fatalf("unexpected kind %v", doc["kind"])
		}
		if err != nil {
			t.Fatalf("%v: %v", doc["kind"], err)
		}
	}
	if ef == nil || ra == nil {
		t.Fatal("want one EnvoyFilter and one RequestAuthentication")
	}
	return ef, ra
}

// TestIstioEnvoyFilter decodes the EnvoyFilter and the Envoy config it patches
// in, and checks it inserts the same filters as envoy.yaml, in the same places.
func TestIstioEnvoyFilter(t *testing.T) {
	ef, ra := istioDocs(t)
	if ef.APIVersion != "networking.istio.io/v1alpha3" {
		t.Errorf("EnvoyFilter apiVersion: got %q, want networking.istio.io/v1alpha3", ef.APIVersion)
	}

	var gotExtProc, gotStrip, gotBuffer bool
	for i, p := range ef.Spec.ConfigPatches {
		name := fmt.Sprintf("patch %d (%s %s)", i, p.ApplyTo, p.Patch.Operation)
		for _, e := range []struct {
			field, value string
			allowed      []string
		}{
			{"applyTo", p.ApplyTo, istioApplyTo},
			{"match.context", p.Match.Context, istioContexts},
			{"patch.operation", p.Patch.Operation, istioOperations},
		} {
			if !slices.Contains(e.allowed, e.value) {
				t.Errorf("%s: %s %q is not one of %v", name, e.field, e.value, e.allowed)
			}
		}
		switch p.ApplyTo {
		case "HTTP_FILTER":
			if p.Match.Listener == nil || p.Match.Listener.FilterChain == nil || p.Match.Listener.FilterChain.Filter == nil ||
				p.Match.Listener.FilterChain.Filter.Name != hcmFilter {
				t.Errorf("%s: want a match on %s", name, hcmFilter)
				continue
			}
			var f hcmv3.HttpFilter
			if err := decodeProto(p.Patch.Value, &f); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			switch f.GetName() {
			case extProcFilter:
				gotExtProc = true
				sub := p.Match.Listener.FilterChain.Filter.SubFilter
				if p.Patch.Operation != "INSERT_BEFORE" || sub == nil || sub.Name != routerFilter {
					t.Errorf("%s: want ext_proc INSERT_BEFORE %s", name, routerFilter)
				}
				var ep extprocv3.ExternalProcessor
				if err := f.GetTypedConfig().UnmarshalTo(&ep); err != nil {
					t.Fatal(err)
				}
				checkExtProcContract(t, &ep)
				svc := kubeService(t)
				want := fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", svc.grpcPort, svc.name, svc.namespace)
				if got := ep.GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != want {
					t.Errorf("ext_proc cluster: got %q, want %q (the Service in deploy/kubernetes/base)", got, want)
				}
			default:
				var hm headermutationv3.HeaderMutation
				if err := f.GetTypedConfig().UnmarshalTo(&hm); err != nil {
					t.Errorf("%s: filter %s: want a header_mutation, got %v", name, f.GetName(), err)
					continue
				}
				gotStrip = true
				if p.Patch.Operation != "INSERT_FIRST" {
					t.Errorf("%s: want the identity strip INSERT_FIRST, before Istio's jwt_authn", name)
				}
				var removed []string
				for _, m := range hm.GetMutations().GetRequestMutations() {
					removed = append(removed, m.GetRemove())
				}
				checkStripsIdentity(t, name, removed)
			}
		case "VIRTUAL_HOST":
			// A MERGE value is a partial VirtualHost: decode it strictly, but its
			// required fields (name, domains) come from Istio, so skip ValidateAll.
			var vh routev3.VirtualHost
			if err := strict.Unmarshal(toJSON(t, p.Patch.Value), &vh); err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			gotBuffer = true
			checkBodyLimit(t, name, vh.GetRequestBodyBufferLimit().GetValue())
			// On the LLM host's virtual host only, and the identity and
			// accept-encoding go no further than tokenwarden.
			if rc := p.Match.RouteConfiguration; rc == nil || rc.Vhost == nil || rc.Vhost.Name == "" {
				t.Errorf("%s: want a match on the LLM host's virtual host (routeConfiguration.vhost.name)", name)
			}
			checkStripsIdentity(t, name+" request_headers_to_remove", vh.GetRequestHeadersToRemove())
			if !slices.Contains(vh.GetRequestHeadersToRemove(), "accept-encoding") {
				t.Errorf("%s: request_headers_to_remove %v, want accept-encoding", name, vh.GetRequestHeadersToRemove())
			}
		default:
			t.Errorf("%s: unexpected patch", name)
		}
	}
	if !gotExtProc || !gotStrip || !gotBuffer {
		t.Errorf("patches: ext_proc %v, identity strip %v, body buffer %v; want all three", gotExtProc, gotStrip, gotBuffer)
	}

	// A gateway of its own: the shared ingress gateway's other
	// applications get none of this.
	sel := ef.Spec.WorkloadSelector.Labels
	if len(sel) == 0 || sel["istio"] == "ingressgateway" {
		t.Errorf("EnvoyFilter workloadSelector %v: want the LLM gateway's own label, not the shared ingress gateway", sel)
	}
	if !maps.Equal(ra.Spec.Selector.MatchLabels, sel) {
		t.Errorf("RequestAuthentication selector %v, want the EnvoyFilter's %v", ra.Spec.Selector.MatchLabels, sel)
	}

	var claimed []string
	for _, r := range ra.Spec.JwtRules {
		for _, c := range r.OutputClaimToHeaders {
			claimed = append(claimed, c.Header)
		}
	}
	checkStripsIdentity(t, "RequestAuthentication outputClaimToHeaders", claimed)
}

// checkStripsIdentity asserts headers covers every identity header the
// Kubernetes ConfigMap's tokenwarden config reads.
func checkStripsIdentity(t *testing.T, where string, headers []string) {
	t.Helper()
	for _, h := range kubeIdentityHeaders(t) {
		if !slices.Contains(headers, h) {
			t.Errorf("%s: got %v, want %q among them (tokenwarden reads identity from it)", where, headers, h)
		}
	}
}

// checkBodyLimit asserts a request body buffer limit lets a 32 MiB prompt in and
// fits, with headers, in tokenwarden's gRPC message limit.
func checkBodyLimit(t *testing.T, where string, got uint64) {
	t.Helper()
	if got < minBufferedBody || got > maxGRPCMessage-(1<<20) {
		t.Errorf("%s: body buffer limit %d, want between %d and %d", where, got, minBufferedBody, maxGRPCMessage-(1<<20))
	}
}
