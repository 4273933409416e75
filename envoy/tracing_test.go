package envoy

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// operationsDoc holds the HTTP connection manager tracing block that the
// operations doc tells people to add.
const operationsDoc = "../docs/operations.md"

// docTracing returns the tracing block of the operations doc's Envoy
// example, parsed.
func docTracing(t *testing.T) map[string]any {
	t.Helper()
	md := string(readFile(t, operationsDoc))
	for _, block := range fencedBlocks(md) {
		if !strings.Contains(block, "envoy.tracers.opentelemetry") {
			continue
		}
		var filters []map[string]any
		if err := yaml.Unmarshal([]byte(block), &filters); err != nil || len(filters) != 1 {
			t.Fatalf("%s: the Envoy tracing example is not a one-filter YAML list: %v", operationsDoc, err)
		}
		tracing, _ := path(t, filters[0], "typed_config", "tracing").(map[string]any)
		if tracing == nil {
			t.Fatalf("%s: the Envoy tracing example has no typed_config.tracing", operationsDoc)
		}
		return tracing
	}
	t.Fatalf("%s: no Envoy tracing example (a block naming envoy.tracers.opentelemetry)", operationsDoc)
	return nil
}

// withDocTracing turns on tracing in the listener "llm" as the operations
// doc shows, every request sampled (so the run is deterministic), towards a
// collector cluster at an address where nothing listens: Envoy's exports
// fail, which changes nothing for the requests.
func withDocTracing(t *testing.T) func(map[string]any) {
	tracing := docTracing(t)
	collector := freeAddr(t)
	return func(doc map[string]any) {
		tracing["random_sampling"] = map[string]any{"value": 100}
		hcm := path(t, doc, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config").(map[string]any)
		hcm["tracing"] = tracing
		cluster := path(t, tracing, "provider", "typed_config", "grpc_service", "envoy_grpc", "cluster_name").(string)
		res := path(t, doc, "static_resources").(map[string]any)
		res["clusters"] = append(res["clusters"].([]any), map[string]any{
			"name": cluster,
			"type": "STATIC",
			"typed_extension_protocol_options": map[string]any{
				"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": map[string]any{
					"@type":                "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
					"explicit_http_config": map[string]any{"http2_protocol_options": map[string]any{}},
				},
			},
			"load_assignment": map[string]any{"cluster_name": cluster, "endpoints": []any{map[string]any{
				"lb_endpoints": []any{map[string]any{"endpoint": map[string]any{"address": map[string]any{
					"socket_address": socketAddress(t, collector)}}}}}}},
		})
	}
}

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$`)

// TestEnvoyTracingReachesExtProc pins what tokenwarden's spans rely on to
// join Envoy's trace, with the tracing block the operations doc shows:
// Envoy sends the context of its span for the ext_proc call in the gRPC
// stream's metadata, in the client's trace when the client sent one, and
// adds no traceparent to the request headers the filter sees (so reading
// the headers alone would miss every trace Envoy starts).
func TestEnvoyTracingReachesExtProc(t *testing.T) {
	st := startStack(t, relaxMessageTimeout(t), withDocTracing(t))
	token := mintDemoToken(t, map[string]any{"tenant": "acme", "sub": "alice", "tier": "free"})
	const clientTrace, clientSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	tests := []struct {
		name        string
		traceparent string // the client's
		wantTrace   string // "" means any
	}{
		{"Envoy starts the trace", "", ""},
		{"the client's trace", "00-" + clientTrace + "-" + clientSpan + "-01", clientTrace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"Authorization": "Bearer " + token}
			if tt.traceparent != "" {
				h["traceparent"] = tt.traceparent
			}
			resp, err := post(t, st.addrs.listen, chatBody(100), h)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status: got %d, want 200", resp.StatusCode)
			}
			ex := st.proc.last(t)
			md := ex.grpcMetadata.Get("traceparent")
			if len(md) != 1 || !traceparentRE.MatchString(md[0]) {
				t.Fatalf("traceparent in the ext_proc stream's metadata: got %q, want one", md)
			}
			m := traceparentRE.FindStringSubmatch(md[0])
			if tt.wantTrace != "" && m[1] != tt.wantTrace {
				t.Errorf("metadata trace ID: got %s, want the client's %s", m[1], tt.wantTrace)
			}
			if m[2] == clientSpan {
				t.Errorf("metadata span ID: got the client's own, want Envoy's span for the ext_proc call")
			}
			got := ex.headers["traceparent"]
			switch {
			case tt.traceparent == "" && len(got) != 0:
				t.Errorf("request headers: got traceparent %q, want none (Envoy's router adds it upstream only)", got)
			case tt.traceparent != "" && (len(got) != 1 || got[0] != tt.traceparent):
				t.Errorf("request headers: got traceparent %q, want the client's %q", got, tt.traceparent)
			}
		})
	}
}
