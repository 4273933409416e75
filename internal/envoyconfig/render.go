// Package envoyconfig renders the shipped Envoy bootstrap (envoy/envoy.yaml)
// for processes on this machine: the commands that run Envoy next to
// tokenwarden and fakellm (the local demo, the soak) move its four
// addresses to loopback and change nothing else, so that they run the
// configuration the tests validate.
package envoyconfig

import (
	"fmt"
	"net"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Addrs are the host:port addresses Render puts in the bootstrap.
type Addrs struct {
	Listen      string // the listener "llm", where clients send requests
	Admin       string // Envoy's admin interface
	Tokenwarden string // the endpoint of the cluster "tokenwarden" (ext_proc)
	Fakellm     string // the endpoint of the cluster "fakellm" (the upstream)
}

// Render returns the shipped Envoy bootstrap cfg with its four addresses
// replaced: the listener "llm", the admin interface, and the endpoints of
// the clusters "tokenwarden" and "fakellm" (docker compose host names in
// the file). Everything else is the file as shipped.
func Render(cfg []byte, a Addrs) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(cfg, &doc); err != nil {
		return nil, err
	}
	set := func(parent map[string]any, key, hostport string) error {
		if parent == nil {
			return fmt.Errorf("no %s to set to %s", key, hostport)
		}
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(port)
		if err != nil {
			return err
		}
		parent[key] = map[string]any{"socket_address": map[string]any{"address": host, "port_value": n}}
		return nil
	}
	if err := set(mapAt(doc, "admin"), "address", a.Admin); err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	res := mapAt(doc, "static_resources")
	if err := set(named(res, "listeners", "llm"), "address", a.Listen); err != nil {
		return nil, fmt.Errorf("listener llm: %w", err)
	}
	for name, addr := range map[string]string{"tokenwarden": a.Tokenwarden, "fakellm": a.Fakellm} {
		eps, _ := mapAt(named(res, "clusters", name), "load_assignment")["endpoints"].([]any)
		if len(eps) != 1 {
			return nil, fmt.Errorf("cluster %s: want exactly one endpoint group", name)
		}
		lbs, _ := eps[0].(map[string]any)["lb_endpoints"].([]any)
		if len(lbs) != 1 {
			return nil, fmt.Errorf("cluster %s: want exactly one endpoint", name)
		}
		ep, _ := lbs[0].(map[string]any)
		if err := set(mapAt(ep, "endpoint"), "address", addr); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	return yaml.Marshal(doc)
}

// mapAt returns m[key] as a mapping, or nil.
func mapAt(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	return v
}

// named returns the element of the list m[key] whose name is name, or nil.
func named(m map[string]any, key, name string) map[string]any {
	list, _ := m[key].([]any)
	for _, it := range list {
		if e, ok := it.(map[string]any); ok && e["name"] == name {
			return e
		}
	}
	return nil
}
