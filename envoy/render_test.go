package envoy

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// addrs are the host:port addresses a test runs envoy.yaml with, in place of the
// docker compose ones.
type addrs struct {
	listen      string // the "llm" listener (compose: 0.0.0.0:10000)
	admin       string // Envoy's admin interface (compose: 0.0.0.0:9901)
	tokenwarden string // the "tokenwarden" cluster (compose: tokenwarden:50051)
	upstream    string // the "fakellm" cluster (compose: fakellm:8081)
}

// socketAddress is the YAML form of an Envoy SocketAddress.
func socketAddress(t *testing.T, hostport string) map[string]any {
	t.Helper()
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatalf("address %q: %v", hostport, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("address %q: %v", hostport, err)
	}
	return map[string]any{"address": host, "port_value": p}
}

// named returns the element of a YAML list whose "name" is name.
func named(t *testing.T, list any, name string) map[string]any {
	t.Helper()
	items, _ := list.([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["name"] == name {
			return m
		}
	}
	t.Fatalf("no element named %q", name)
	return nil
}

// renderBootstrap returns envoy.yaml with its addresses replaced by a's. It
// rewrites the parsed YAML rather than the text, so the shipped file needs no
// placeholders and stays valid for docker compose as it is; it fails the test
// when a listener or cluster it expects has been renamed.
//
// Each edit, if any, may change the parsed document further (a test that needs a
// variant of the shipped config); the address rewrite comes first.
func renderBootstrap(t *testing.T, a addrs, edits ...func(doc map[string]any)) []byte {
	t.Helper()
	doc := yamlToMap(t, readFile(t, "envoy.yaml"))
	path(t, doc, "admin", "address").(map[string]any)["socket_address"] = socketAddress(t, a.admin)
	res := path(t, doc, "static_resources")
	named(t, path(t, res, "listeners"), "llm")["address"] = map[string]any{"socket_address": socketAddress(t, a.listen)}
	for name, addr := range map[string]string{twCluster: a.tokenwarden, upstreamCluster: a.upstream} {
		c := named(t, path(t, res, "clusters"), name)
		eps := path(t, c, "load_assignment", "endpoints").([]any)
		if len(eps) != 1 {
			t.Fatalf("cluster %s: got %d locality endpoint groups, want 1", name, len(eps))
		}
		lbs := path(t, eps[0], "lb_endpoints").([]any)
		if len(lbs) != 1 {
			t.Fatalf("cluster %s: got %d endpoints, want 1", name, len(lbs))
		}
		path(t, lbs[0], "endpoint", "address").(map[string]any)["socket_address"] = socketAddress(t, addr)
	}
	for _, edit := range edits {
		edit(doc)
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRenderBootstrap checks the rewrite touches exactly the four addresses and
// that Envoy accepts the result.
func TestRenderBootstrap(t *testing.T) {
	a := addrs{listen: "127.0.0.1:21000", admin: "127.0.0.1:21001", tokenwarden: "127.0.0.2:21002", upstream: "127.0.0.3:21003"}
	out := string(renderBootstrap(t, a))
	for _, gone := range []string{"tokenwarden:50051", "fakellm:8081", "0.0.0.0"} {
		host, port, _ := strings.Cut(gone, ":")
		if strings.Contains(out, "address: "+host) && (port == "" || strings.Contains(out, "port_value: "+port)) {
			t.Errorf("rendered config still has %s", gone)
		}
	}
	for _, want := range []string{a.listen, a.admin, a.tokenwarden, a.upstream} {
		host, port, _ := strings.Cut(want, ":")
		if !strings.Contains(out, "address: "+host) || !strings.Contains(out, "port_value: "+port) {
			t.Errorf("rendered config lacks %s", want)
		}
	}
	bin := envoyBinary(t)
	if msg, ok := envoyValidate(t, bin, writeTemp(t, "envoy.yaml", []byte(out))); !ok {
		t.Fatalf("envoy rejects the rendered config:\n%s", msg)
	}
}
