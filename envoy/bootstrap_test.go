package envoy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	headermutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	jwtauthnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// The names the server and its configs agree on (docs/ext-proc-contract.md).
const (
	extProcFilter   = "envoy.filters.http.ext_proc"
	jwtFilter       = "envoy.filters.http.jwt_authn"
	headerFilter    = "envoy.filters.http.header_mutation"
	routerFilter    = "envoy.filters.http.router"
	hcmFilter       = "envoy.filters.network.http_connection_manager"
	jwtNamespace    = "envoy.filters.http.jwt_authn" // where jwt_authn puts the verified payload
	twNamespace     = "tokenwarden"                  // where tokenwarden writes its metadata
	jwtPayloadKey   = "payload"                      // payload_in_metadata in envoy.yaml
	twCluster       = "tokenwarden"
	upstreamCluster = "fakellm"
)

// identityHeaders are the headers tokenwarden's example configs read identity
// from. A client's own copies must never reach tokenwarden.
var identityHeaders = []string{"x-tenant-id", "x-user-id", "x-tier"}

// minBufferedBody is the request body size the shipped config must let through
// BUFFERED ext_proc; maxGRPCMessage is tokenwarden's gRPC receive limit, which
// one ProcessingRequest (body plus headers) must fit in.
const (
	minBufferedBody = 32 << 20
	maxGRPCMessage  = 64 << 20
)

// loadBootstrap decodes a shipped bootstrap strictly and validates it.
func loadBootstrap(t *testing.T, file string) *bootstrapv3.Bootstrap {
	t.Helper()
	var b bootstrapv3.Bootstrap
	if err := decodeProto(yamlToMap(t, readFile(t, file)), &b); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &b
}

// hcmOf returns the HTTP connection manager of the named listener.
func hcmOf(t *testing.T, b *bootstrapv3.Bootstrap, listener string) *hcmv3.HttpConnectionManager {
	t.Helper()
	for _, l := range b.GetStaticResources().GetListeners() {
		if l.GetName() != listener {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				if f.GetName() == hcmFilter {
					var hcm hcmv3.HttpConnectionManager
					if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
						t.Fatal(err)
					}
					return &hcm
				}
			}
		}
	}
	t.Fatalf("listener %q with an HTTP connection manager not found", listener)
	return nil
}

// httpFilter unpacks the typed config of the named HTTP filter into m.
func httpFilter(t *testing.T, hcm *hcmv3.HttpConnectionManager, name string, m proto.Message) {
	t.Helper()
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() == name {
			if err := f.GetTypedConfig().UnmarshalTo(m); err != nil {
				t.Fatalf("filter %s: %v", name, err)
			}
			return
		}
	}
	t.Fatalf("HTTP filter %s not found", name)
}

// cluster returns the named static cluster.
func cluster(t *testing.T, b *bootstrapv3.Bootstrap, name string) *clusterv3.Cluster {
	t.Helper()
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == name {
			return c
		}
	}
	t.Fatalf("cluster %q not found", name)
	return nil
}

// checkExtProcContract asserts the ext_proc settings of
// docs/ext-proc-contract.md, wherever the filter is shipped (bootstrap,
// Istio). The server relies on each of them: e.g. a request body mode other
// than BUFFERED would hand it the body in pieces it cannot estimate from.
// except names settings a deployment cannot express (and documents).
func checkExtProcContract(t *testing.T, ep *extprocv3.ExternalProcessor, except ...string) {
	t.Helper()
	pm := ep.GetProcessingMode()
	checks := []struct {
		name      string
		got, want any
	}{
		{"request_header_mode", pm.GetRequestHeaderMode(), extprocv3.ProcessingMode_SEND},
		{"request_body_mode", pm.GetRequestBodyMode(), extprocv3.ProcessingMode_BUFFERED},
		{"request_trailer_mode", pm.GetRequestTrailerMode(), extprocv3.ProcessingMode_SKIP},
		{"response_header_mode", pm.GetResponseHeaderMode(), extprocv3.ProcessingMode_SEND},
		{"response_body_mode", pm.GetResponseBodyMode(), extprocv3.ProcessingMode_STREAMED},
		{"response_trailer_mode", pm.GetResponseTrailerMode(), extprocv3.ProcessingMode_SKIP},
		{"allow_mode_override", ep.GetAllowModeOverride(), true},
		{"failure_mode_allow", ep.GetFailureModeAllow(), false},
		{"message_timeout", ep.GetMessageTimeout().AsDuration(), time.Second},
		// The longest on_exhausted wait plus its margin: what a held
		// request asks for in override_message_timeout.
		{"max_message_timeout", ep.GetMaxMessageTimeout().AsDuration(), accounting.MaxWaitUpTo + accounting.WaitMargin},
		{"observability_mode", ep.GetObservabilityMode(), false},
		{"disable_immediate_response", ep.GetDisableImmediateResponse(), false},
		{"forwarding_namespaces", ep.GetMetadataOptions().GetForwardingNamespaces().GetUntyped(), []string{jwtNamespace}},
		{"receiving_namespaces", ep.GetMetadataOptions().GetReceivingNamespaces().GetUntyped(), []string{twNamespace}},
		// tokenwarden tells Envoy's own 504/503 after a forwarded request
		// from one for a request never sent by this attribute.
		{"response_attributes", ep.GetResponseAttributes(), []string{"response.code_details"}},
	}
	for _, c := range checks {
		if !equal(c.got, c.want) && !slices.Contains(except, c.name) {
			t.Errorf("ext_proc %s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if ep.GetGrpcService().GetEnvoyGrpc().GetClusterName() == "" {
		t.Errorf("ext_proc grpc_service: got %v, want an envoy_grpc cluster", ep.GetGrpcService())
	}
}

// equal compares the simple values checkExtProcContract deals in.
func equal(a, b any) bool {
	as, aok := a.([]string)
	bs, bok := b.([]string)
	if aok && bok {
		return slices.Equal(as, bs)
	}
	return a == b
}

// TestBootstrapsDecodeAndValidate loads every shipped bootstrap into
// go-control-plane's Bootstrap strictly (unknown fields fail) and runs the
// protoc-gen-validate rules.
func TestBootstrapsDecodeAndValidate(t *testing.T) {
	for _, f := range bootstrapFiles {
		t.Run(f, func(t *testing.T) { loadBootstrap(t, f) })
	}
}

// TestEveryBootstrapIsListed keeps bootstrapFiles complete: every top-level YAML
// file of this package with static_resources is a bootstrap and must be validated.
func TestEveryBootstrapIsListed(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.Contains(string(readFile(t, f)), "static_resources:") && !slices.Contains(bootstrapFiles, f) {
			t.Errorf("%s looks like an Envoy bootstrap but is not in bootstrapFiles", f)
		}
	}
}

// TestBootstrapFilterChain pins what envoy.yaml promises beyond being valid: the
// filter order, the ext_proc contract, identity from verified sources only, and
// buffer limits big enough for large prompts.
func TestBootstrapFilterChain(t *testing.T) {
	b := loadBootstrap(t, "envoy.yaml")
	hcm := hcmOf(t, b, "llm")

	t.Run("filter order", func(t *testing.T) {
		var got []string
		for _, f := range hcm.GetHttpFilters() {
			got = append(got, f.GetName())
		}
		want := []string{headerFilter, jwtFilter, extProcFilter, routerFilter}
		if !slices.Equal(got, want) {
			t.Errorf("HTTP filters: got %v, want %v", got, want)
		}
	})

	t.Run("ext_proc contract", func(t *testing.T) {
		var ep extprocv3.ExternalProcessor
		httpFilter(t, hcm, extProcFilter, &ep)
		checkExtProcContract(t, &ep)
		if got := ep.GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != twCluster {
			t.Errorf("ext_proc cluster: got %q, want %q", got, twCluster)
		}
	})

	t.Run("client identity headers stripped", func(t *testing.T) {
		var hm headermutationv3.HeaderMutation
		httpFilter(t, hcm, headerFilter, &hm)
		var removed []string
		for _, m := range hm.GetMutations().GetRequestMutations() {
			removed = append(removed, m.GetRemove())
		}
		for _, h := range identityHeaders {
			if !slices.Contains(removed, h) {
				t.Errorf("header_mutation removes %v, want %q among them", removed, h)
			}
		}
	})

	t.Run("identity set from the verified JWT", func(t *testing.T) {
		var ja jwtauthnv3.JwtAuthentication
		httpFilter(t, hcm, jwtFilter, &ja)
		if len(ja.GetProviders()) != 1 {
			t.Fatalf("got %d JWT providers, want 1", len(ja.GetProviders()))
		}
		for name, p := range ja.GetProviders() {
			if got := p.GetPayloadInMetadata(); got != jwtPayloadKey {
				t.Errorf("provider %s payload_in_metadata: got %q, want %q", name, got, jwtPayloadKey)
			}
			if !p.GetForward() {
				t.Errorf("provider %s forward: got false, want true", name)
			}
			set := map[string]string{}
			for _, c := range p.GetClaimToHeaders() {
				set[c.GetHeaderName()] = c.GetClaimName()
			}
			for _, h := range identityHeaders {
				if set[h] == "" {
					t.Errorf("provider %s claim_to_headers: no claim sets %q (got %v)", name, h, set)
				}
			}
			if p.GetLocalJwks().GetInlineString() == "" {
				t.Errorf("provider %s: want an inline local JWKS (the demo key)", name)
			}
		}
	})

	t.Run("large bodies buffered", func(t *testing.T) {
		vhs := hcm.GetRouteConfig().GetVirtualHosts()
		if len(vhs) == 0 {
			t.Fatal("no virtual hosts")
		}
		for _, vh := range vhs {
			got := vh.GetRequestBodyBufferLimit().GetValue()
			if got < minBufferedBody || got > maxGRPCMessage-(1<<20) {
				t.Errorf("virtual host %s request_body_buffer_limit: got %d, want between %d and %d (tokenwarden's gRPC limit less 1 MiB for headers)",
					vh.GetName(), got, minBufferedBody, maxGRPCMessage-(1<<20))
			}
			for _, r := range vh.GetRoutes() {
				if d := r.GetRoute().GetTimeout().AsDuration(); d != 0 && d < 5*time.Minute {
					t.Errorf("route %s timeout: got %v, want 0 (none) or at least 5m for long generations", r.GetName(), d)
				}
			}
		}
		if got := cluster(t, b, twCluster).GetPerConnectionBufferLimitBytes().GetValue(); got < maxGRPCMessage {
			t.Errorf("cluster %s per_connection_buffer_limit_bytes: got %d, want at least %d", twCluster, got, maxGRPCMessage)
		}
	})

	t.Run("tokenwarden cluster", func(t *testing.T) {
		c := cluster(t, b, twCluster)
		opts, ok := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
		if !ok {
			t.Fatal("no HttpProtocolOptions: ext_proc needs HTTP/2")
		}
		var po upstreamhttpv3.HttpProtocolOptions
		if err := opts.UnmarshalTo(&po); err != nil {
			t.Fatal(err)
		}
		if po.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
			t.Error("tokenwarden cluster: want explicit_http_config.http2_protocol_options")
		}
		var grpcHC bool
		for _, hc := range c.GetHealthChecks() {
			grpcHC = grpcHC || hc.GetGrpcHealthCheck() != nil
			// Until the cluster carries traffic Envoy checks every
			// no_traffic_interval (60s unset): measured on 1.40, an Envoy
			// that started before tokenwarden saw it healthy after 59s,
			// answering every LLM call 503 until then; with 5s, after 3s.
			nti := hc.GetNoTrafficInterval()
			if nti == nil || nti.AsDuration() > hc.GetInterval().AsDuration() {
				t.Errorf("tokenwarden cluster health check: no_traffic_interval %v, want at most the interval %v", nti.AsDuration(), hc.GetInterval().AsDuration())
			}
		}
		if !grpcHC {
			t.Error("tokenwarden cluster: want a grpc_health_check")
		}
		// Each in-flight LLM request holds one ext_proc stream for its whole length.
		for _, th := range c.GetCircuitBreakers().GetThresholds() {
			if got := th.GetMaxRequests().GetValue(); got < 10000 {
				t.Errorf("tokenwarden cluster max_requests: got %d, want at least 10000 concurrent streams", got)
			}
		}
		if len(c.GetCircuitBreakers().GetThresholds()) == 0 {
			t.Error("tokenwarden cluster: want circuit_breakers raised above the default 1024 requests")
		}
	})

	t.Run("access log shows tokenwarden metadata", func(t *testing.T) {
		if len(hcm.GetAccessLog()) == 0 {
			t.Fatal("no access log")
		}
		var al accesslogv3.StdoutAccessLog
		if err := hcm.GetAccessLog()[0].GetTypedConfig().UnmarshalTo(&al); err != nil {
			t.Fatal(err)
		}
		format := al.GetLogFormat().GetJsonFormat().String()
		for _, key := range []string{"estimate_tokens", "actual_tokens", "limit", "wait_seconds"} {
			if want := "%DYNAMIC_METADATA(" + twNamespace + ":" + key + ")%"; !strings.Contains(format, want) {
				t.Errorf("access log format lacks %s", want)
			}
		}
	})
}

// TestEnvoyValidatesBootstraps runs the real Envoy in validate mode on every
// shipped bootstrap: it knows what the protos cannot tell, e.g. which
// extensions exist in the binary and cross-field rules.
func TestEnvoyValidatesBootstraps(t *testing.T) {
	bin := envoyBinary(t)
	for _, f := range bootstrapFiles {
		t.Run(f, func(t *testing.T) {
			abs, err := filepath.Abs(f)
			if err != nil {
				t.Fatal(err)
			}
			out, ok := envoyValidate(t, bin, abs)
			if !ok {
				t.Fatalf("envoy --mode validate -c %s failed:\n%s", f, out)
			}
			// Deprecated fields still validate, but warn: keep the configs free of
			// them so the next Envoy release does not break users.
			if strings.Contains(strings.ToLower(out), "deprecated") {
				t.Errorf("envoy warns about deprecated fields in %s:\n%s", f, out)
			}
		})
	}
}

// TestEnvoyVersion checks the binary the tests run is the Envoy the configs
// target, so a stale binary on PATH cannot pass configs 1.40 would reject.
func TestEnvoyVersion(t *testing.T) {
	bin := envoyBinary(t)
	out, err := execOutput(bin, "--version")
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	if !strings.Contains(out, "/1.40.") {
		t.Errorf("%s --version: got %q, want Envoy 1.40.x", bin, strings.TrimSpace(out))
	}
}

// execOutput runs a command and returns its combined output.
func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// fileExists reports whether path names an existing file or directory.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
