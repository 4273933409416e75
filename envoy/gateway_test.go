package envoy

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The Envoy Gateway (gateway.envoyproxy.io/v1alpha1) and Gateway API types the
// shipped files use, with the fields they may set (envoyproxy/gateway
// api/v1alpha1: envoyextensionypolicy_types.go, ext_proc_types.go,
// clienttrafficpolicy_types.go, connection_types.go, backendtrafficpolicy_types.go,
// circuitbreaker_types.go, securitypolicy_types.go, jwt_types.go).

type targetRef struct {
	Group       string `yaml:"group"`
	Kind        string `yaml:"kind"`
	Name        string `yaml:"name"`
	SectionName string `yaml:"sectionName"`
}

type backendRef struct {
	Group     string `yaml:"group"`
	Kind      string `yaml:"kind"`
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
	Port      int    `yaml:"port"`
	Weight    *int   `yaml:"weight"`
}

type circuitBreaker struct {
	MaxConnections           int64 `yaml:"maxConnections"`
	MaxPendingRequests       int64 `yaml:"maxPendingRequests"`
	MaxParallelRequests      int64 `yaml:"maxParallelRequests"`
	MaxParallelRetries       int64 `yaml:"maxParallelRetries"`
	MaxRequestsPerConnection int64 `yaml:"maxRequestsPerConnection"`
}

type processingModeOptions struct {
	Body       *string  `yaml:"body"`
	Attributes []string `yaml:"attributes"`
}

type extensionPolicy struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		TargetRefs []targetRef `yaml:"targetRefs"`
		ExtProc    []struct {
			BackendRefs     []backendRef `yaml:"backendRefs"`
			BackendSettings *struct {
				CircuitBreaker *circuitBreaker `yaml:"circuitBreaker"`
				Connection     *struct {
					BufferLimit string `yaml:"bufferLimit"`
				} `yaml:"connection"`
				HealthCheck *struct {
					Active *struct {
						Type               string    `yaml:"type"`
						GRPC               *struct{} `yaml:"grpc"`
						Timeout            string    `yaml:"timeout"`
						Interval           string    `yaml:"interval"`
						UnhealthyThreshold int       `yaml:"unhealthyThreshold"`
						HealthyThreshold   int       `yaml:"healthyThreshold"`
					} `yaml:"active"`
				} `yaml:"healthCheck"`
			} `yaml:"backendSettings"`
			ProcessingMode *struct {
				Request           *processingModeOptions `yaml:"request"`
				Response          *processingModeOptions `yaml:"response"`
				AllowModeOverride bool                   `yaml:"allowModeOverride"`
			} `yaml:"processingMode"`
			MessageTimeout string `yaml:"messageTimeout"`
			FailOpen       *bool  `yaml:"failOpen"`
			ShadowMode     *bool  `yaml:"shadowMode"`
			StatusOnError  *int   `yaml:"statusOnError"`
			Metadata       *struct {
				AccessibleNamespaces []string `yaml:"accessibleNamespaces"`
				WritableNamespaces   []string `yaml:"writableNamespaces"`
			} `yaml:"metadata"`
		} `yaml:"extProc"`
	} `yaml:"spec"`
}

type referenceGrant struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		From []struct {
			Group     string `yaml:"group"`
			Kind      string `yaml:"kind"`
			Namespace string `yaml:"namespace"`
		} `yaml:"from"`
		To []struct {
			Group string `yaml:"group"`
			Kind  string `yaml:"kind"`
			Name  string `yaml:"name"`
		} `yaml:"to"`
	} `yaml:"spec"`
}

type clientTrafficPolicy struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		TargetRefs []targetRef `yaml:"targetRefs"`
		Connection *struct {
			BufferLimit string `yaml:"bufferLimit"`
		} `yaml:"connection"`
		Headers *struct {
			EarlyRequestHeaders *struct {
				Remove []string `yaml:"remove"`
			} `yaml:"earlyRequestHeaders"`
		} `yaml:"headers"`
	} `yaml:"spec"`
}

type backendTrafficPolicy struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		TargetRefs     []targetRef     `yaml:"targetRefs"`
		CircuitBreaker *circuitBreaker `yaml:"circuitBreaker"`
		RequestBuffer  *struct {
			Limit string `yaml:"limit"`
		} `yaml:"requestBuffer"`
	} `yaml:"spec"`
}

type securityPolicy struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		TargetRefs []targetRef `yaml:"targetRefs"`
		JWT        *struct {
			Optional  *bool `yaml:"optional"`
			Providers []struct {
				Name       string   `yaml:"name"`
				Issuer     string   `yaml:"issuer"`
				Audiences  []string `yaml:"audiences"`
				RemoteJWKS *struct {
					URI string `yaml:"uri"`
				} `yaml:"remoteJWKS"`
				ClaimToHeaders []struct {
					Header string `yaml:"header"`
					Claim  string `yaml:"claim"`
				} `yaml:"claimToHeaders"`
			} `yaml:"providers"`
		} `yaml:"jwt"`
	} `yaml:"spec"`
}

type httpRoute struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Spec       struct {
		ParentRefs []struct {
			Name      string `yaml:"name"`
			Namespace string `yaml:"namespace"`
		} `yaml:"parentRefs"`
		Hostnames []string `yaml:"hostnames"`
		Rules     []struct {
			Matches []struct {
				Path *struct {
					Type  string `yaml:"type"`
					Value string `yaml:"value"`
				} `yaml:"path"`
			} `yaml:"matches"`
			Filters []struct {
				Type                  string `yaml:"type"`
				RequestHeaderModifier *struct {
					Remove []string `yaml:"remove"`
				} `yaml:"requestHeaderModifier"`
			} `yaml:"filters"`
			BackendRefs []backendRef `yaml:"backendRefs"`
			Timeouts    *struct {
				Request        string `yaml:"request"`
				BackendRequest string `yaml:"backendRequest"`
			} `yaml:"timeouts"`
		} `yaml:"rules"`
	} `yaml:"spec"`
}

// gatewayDocs holds the decoded Envoy Gateway manifests.
type gatewayDocs struct {
	extension *extensionPolicy
	grant     *referenceGrant
	client    *clientTrafficPolicy
	backend   *backendTrafficPolicy
	security  *securityPolicy
	route     *httpRoute
}

// loadGateway decodes every document in envoy/gateway strictly, by kind.
func loadGateway(t *testing.T) gatewayDocs {
	t.Helper()
	var g gatewayDocs
	files, err := filepath.Glob("gateway/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for _, doc := range yamlDocs(t, readFile(t, f)) {
			var dst any
			switch doc["kind"] {
			case "EnvoyExtensionPolicy":
				g.extension = &extensionPolicy{}
				dst = g.extension
			case "ReferenceGrant":
				g.grant = &referenceGrant{}
				dst = g.grant
			case "ClientTrafficPolicy":
				g.client = &clientTrafficPolicy{}
				dst = g.client
			case "BackendTrafficPolicy":
				g.backend = &backendTrafficPolicy{}
				dst = g.backend
			case "SecurityPolicy":
				g.security = &securityPolicy{}
				dst = g.security
			case "HTTPRoute":
				g.route = &httpRoute{}
				dst = g.route
			default:
				t.Fatalf("%s: unexpected kind %v", f, doc["kind"])
			}
			if err := decodeStrict(doc, dst); err != nil {
				t.Fatalf("%s: %v: %v", f, doc["kind"], err)
			}
		}
	}
	if g.extension == nil || g.grant == nil || g.client == nil || g.backend == nil || g.security == nil || g.route == nil {
		t.Fatalf("want one of each: EnvoyExtensionPolicy, ReferenceGrant, ClientTrafficPolicy, BackendTrafficPolicy, SecurityPolicy, HTTPRoute")
	}
	return g
}

// egBodyModes maps Envoy Gateway's body modes to Envoy's (ext_proc_types.go).
var egBodyModes = map[string]extprocv3.ProcessingMode_BodySendMode{
	"Streamed":           extprocv3.ProcessingMode_STREAMED,
	"Buffered":           extprocv3.ProcessingMode_BUFFERED,
	"BufferedPartial":    extprocv3.ProcessingMode_BUFFERED_PARTIAL,
	"FullDuplexStreamed": extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED,
}

// egAttributePattern is the CRD validation of a processingMode attribute
// (ext_proc_types.go: ProcessingModeOptions.Attributes).
var egAttributePattern = regexp.MustCompile(`^(connection\.|source\.|destination\.|request\.|response\.|upstream\.|xds\.route_)[a-z_1-9]*$`)

// egExtProc builds the ext_proc filter config Envoy Gateway generates from an
// EnvoyExtensionPolicy's extProc entry, following its translator
// (internal/xds/translator/extproc.go): headers are sent for a direction that is
// present, bodies per its mode, trailers skipped.
func egExtProc(t *testing.T, p *extensionPolicy) *extprocv3.ExternalProcessor {
	t.Helper()
	if len(p.Spec.ExtProc) != 1 {
		t.Fatalf("got %d extProc entries, want 1", len(p.Spec.ExtProc))
	}
	e := p.Spec.ExtProc[0]
	pm := &extprocv3.ProcessingMode{
		RequestHeaderMode: extprocv3.ProcessingMode_SKIP, ResponseHeaderMode: extprocv3.ProcessingMode_SKIP,
		RequestTrailerMode: extprocv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocv3.ProcessingMode_SKIP,
	}
	ep := &extprocv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "envoyextensionpolicy/" + p.Metadata.Namespace + "/" + p.Metadata.Name},
		}},
		ProcessingMode: pm,
	}
	body := func(o *processingModeOptions) extprocv3.ProcessingMode_BodySendMode {
		for _, a := range o.Attributes {
			if !egAttributePattern.MatchString(a) {
				t.Fatalf("attribute %q: Envoy Gateway's CRD validation refuses it (%s)", a, egAttributePattern)
			}
		}
		if o.Body == nil {
			return extprocv3.ProcessingMode_NONE
		}
		m, ok := egBodyModes[*o.Body]
		if !ok {
			t.Fatalf("body mode %q is not one of Envoy Gateway's", *o.Body)
		}
		return m
	}
	if m := e.ProcessingMode; m != nil {
		if m.Request != nil {
			pm.RequestHeaderMode, pm.RequestBodyMode = extprocv3.ProcessingMode_SEND, body(m.Request)
			ep.RequestAttributes = m.Request.Attributes
		}
		if m.Response != nil {
			pm.ResponseHeaderMode, pm.ResponseBodyMode = extprocv3.ProcessingMode_SEND, body(m.Response)
			ep.ResponseAttributes = m.Response.Attributes
		}
		ep.AllowModeOverride = m.AllowModeOverride
	}
	if e.FailOpen != nil {
		ep.FailureModeAllow = *e.FailOpen
	}
	if e.MessageTimeout != "" {
		d, err := time.ParseDuration(e.MessageTimeout)
		if err != nil {
			t.Fatalf("messageTimeout %q: %v", e.MessageTimeout, err)
		}
		ep.MessageTimeout = durationpb.New(d)
	}
	if md := e.Metadata; md != nil {
		ep.MetadataOptions = &extprocv3.MetadataOptions{
			ForwardingNamespaces: &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: md.AccessibleNamespaces},
			ReceivingNamespaces:  &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: md.WritableNamespaces},
		}
	}
	if err := ep.ValidateAll(); err != nil {
		t.Fatalf("the ext_proc config Envoy Gateway would build: %v", err)
	}
	return ep
}

// parseQuantity reads a Kubernetes quantity of bytes ("48Mi", "512Ki", "1000").
func parseQuantity(t *testing.T, q string) uint64 {
	t.Helper()
	mult := uint64(1)
	for suffix, m := range map[string]uint64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 1e3, "M": 1e6, "G": 1e9} {
		if strings.HasSuffix(q, suffix) {
			q, mult = strings.TrimSuffix(q, suffix), m
			break
		}
	}
	n, err := strconv.ParseUint(q, 10, 64)
	if err != nil {
		t.Fatalf("quantity %q: %v", q, err)
	}
	return n * mult
}

// TestEnvoyGatewayPolicies checks the Envoy Gateway files express the same
// contract as envoy.yaml and refer to each other and to deploy/kubernetes/base
// consistently.
func TestEnvoyGatewayPolicies(t *testing.T) {
	g := loadGateway(t)
	svc := kubeService(t)

	t.Run("ext_proc contract", func(t *testing.T) {
		// Envoy Gateway's ExtProc has no max_message_timeout: the
		// filter it builds takes no override_message_timeout, so a
		// limit's on_exhausted wait cannot hold a request behind it
		// (docs/configuration.md says so).
		checkExtProcContract(t, egExtProc(t, g.extension), "max_message_timeout")
	})

	t.Run("backend is the tokenwarden Service", func(t *testing.T) {
		refs := g.extension.Spec.ExtProc[0].BackendRefs
		if len(refs) != 1 || refs[0].Name != svc.name || refs[0].Namespace != svc.namespace || refs[0].Port != svc.grpcPort {
			t.Errorf("backendRefs: got %+v, want %s.%s:%d", refs, svc.name, svc.namespace, svc.grpcPort)
		}
		bs := g.extension.Spec.ExtProc[0].BackendSettings
		if bs == nil || bs.CircuitBreaker == nil || bs.CircuitBreaker.MaxParallelRequests < 10000 {
			t.Fatalf("backendSettings.circuitBreaker: got %+v, want maxParallelRequests of at least 10000 concurrent streams", bs)
		}
		// A 48 MiB body travels to tokenwarden in one gRPC message.
		if bs.Connection == nil || parseQuantity(t, bs.Connection.BufferLimit) < 64<<20 {
			t.Errorf("backendSettings.connection: got %+v, want a bufferLimit of at least 64Mi", bs.Connection)
		}
		if hc := bs.HealthCheck; hc == nil || hc.Active == nil || hc.Active.Type != "GRPC" {
			t.Errorf("backendSettings.healthCheck: got %+v, want an active GRPC check", hc)
		}
	})

	t.Run("reference grant allows the policy", func(t *testing.T) {
		gr := g.grant
		ok := gr.Metadata.Namespace == svc.namespace && len(gr.Spec.From) == 1 && len(gr.Spec.To) == 1 &&
			gr.Spec.From[0].Kind == "EnvoyExtensionPolicy" && gr.Spec.From[0].Group == "gateway.envoyproxy.io" &&
			gr.Spec.From[0].Namespace == g.extension.Metadata.Namespace &&
			gr.Spec.To[0].Kind == "Service" && gr.Spec.To[0].Group == "" && gr.Spec.To[0].Name == svc.name
		if !ok {
			t.Errorf("ReferenceGrant %+v does not let EnvoyExtensionPolicy in %s reach Service %s/%s", gr, g.extension.Metadata.Namespace, svc.namespace, svc.name)
		}
	})

	t.Run("targets", func(t *testing.T) {
		routeRef := targetRef{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", Name: g.route.Metadata.Name}
		for name, refs := range map[string][]targetRef{
			"EnvoyExtensionPolicy": g.extension.Spec.TargetRefs,
			"BackendTrafficPolicy": g.backend.Spec.TargetRefs,
			"SecurityPolicy":       g.security.Spec.TargetRefs,
		} {
			if !slices.Equal(refs, []targetRef{routeRef}) {
				t.Errorf("%s targetRefs: got %+v, want %+v", name, refs, routeRef)
			}
		}
		// ClientTrafficPolicy attaches to Gateways only: the route's, in
		// the Gateway's namespace (a policy's targetRefs have none of
		// their own), which the route must then name.
		if len(g.route.Spec.ParentRefs) != 1 || g.route.Spec.ParentRefs[0].Namespace == "" {
			t.Fatalf("HTTPRoute parentRefs: got %+v, want one Gateway, with its namespace", g.route.Spec.ParentRefs)
		}
		parent := g.route.Spec.ParentRefs[0]
		gwRef := targetRef{Group: "gateway.networking.k8s.io", Kind: "Gateway", Name: parent.Name}
		if !slices.Equal(g.client.Spec.TargetRefs, []targetRef{gwRef}) || g.client.Metadata.Namespace != parent.Namespace {
			t.Errorf("ClientTrafficPolicy %s targetRefs: got %+v, want %+v in the Gateway's namespace %s", g.client.Metadata.Namespace, g.client.Spec.TargetRefs, gwRef, parent.Namespace)
		}
		for kind, ns := range map[string]string{"BackendTrafficPolicy": g.backend.Metadata.Namespace,
			"SecurityPolicy": g.security.Metadata.Namespace, "EnvoyExtensionPolicy": g.extension.Metadata.Namespace} {
			if ns != g.route.Metadata.Namespace {
				t.Errorf("%s namespace: got %q, want the route's %q (policies attach within a namespace)", kind, ns, g.route.Metadata.Namespace)
			}
		}
	})

	t.Run("large bodies buffered on the route", func(t *testing.T) {
		if g.backend.Spec.RequestBuffer == nil {
			t.Fatal("BackendTrafficPolicy: no requestBuffer.limit (Envoy Gateway's connections buffer 32 KiB)")
		}
		checkBodyLimit(t, "BackendTrafficPolicy requestBuffer.limit", parseQuantity(t, g.backend.Spec.RequestBuffer.Limit))
		if g.client.Spec.Connection != nil {
			t.Errorf("ClientTrafficPolicy connection %+v: a buffer for every route of the Gateway; the route's requestBuffer is enough", g.client.Spec.Connection)
		}
	})

	t.Run("identity and accept-encoding not sent to the provider", func(t *testing.T) {
		for i, r := range g.route.Spec.Rules {
			var removed []string
			for _, f := range r.Filters {
				if f.Type == "RequestHeaderModifier" && f.RequestHeaderModifier != nil {
					removed = append(removed, f.RequestHeaderModifier.Remove...)
				}
			}
			checkStripsIdentity(t, fmt.Sprintf("HTTPRoute rule %d RequestHeaderModifier.remove", i), removed)
			if !slices.Contains(removed, "accept-encoding") {
				t.Errorf("HTTPRoute rule %d RequestHeaderModifier.remove %v: want accept-encoding", i, removed)
			}
		}
	})

	t.Run("identity only from the verified token", func(t *testing.T) {
		var removed []string
		if h := g.client.Spec.Headers; h != nil && h.EarlyRequestHeaders != nil {
			removed = h.EarlyRequestHeaders.Remove
		}
		checkStripsIdentity(t, "ClientTrafficPolicy earlyRequestHeaders.remove", removed)
		var claimed []string
		for _, p := range g.security.Spec.JWT.Providers {
			for _, c := range p.ClaimToHeaders {
				claimed = append(claimed, c.Header)
			}
		}
		checkStripsIdentity(t, "SecurityPolicy claimToHeaders", claimed)
	})

	t.Run("long generations not cut", func(t *testing.T) {
		for i, r := range g.route.Spec.Rules {
			if r.Timeouts == nil {
				t.Errorf("HTTPRoute rule %d: no timeouts.request (the default cuts streams after 15s)", i)
				continue
			}
			if d, err := time.ParseDuration(r.Timeouts.Request); err != nil || (d != 0 && d < 5*time.Minute) {
				t.Errorf("HTTPRoute rule %d timeouts.request: got %q, want 0 or at least 5m", i, r.Timeouts.Request)
			}
		}
	})
}

// String makes a targetRef readable in failure messages.
func (r targetRef) String() string { return fmt.Sprintf("%s/%s %s", r.Group, r.Kind, r.Name) }
