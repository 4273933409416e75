package envoyconfig

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestRender renders the shipped envoy.yaml and checks that the
// four addresses moved and nothing else changed.
func TestRender(t *testing.T) {
	shipped, err := os.ReadFile("../../envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := Addrs{Listen: "127.0.0.1:1", Admin: "127.0.0.1:2", Tokenwarden: "127.0.0.1:3", Fakellm: "127.0.0.1:4"}
	out, err := Render(shipped, a)
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(shipped, &want); err != nil {
		t.Fatal(err)
	}
	sock := func(host string, port int) map[string]any {
		return map[string]any{"socket_address": map[string]any{"address": host, "port_value": port}}
	}
	mapAt(want, "admin")["address"] = sock("127.0.0.1", 2)
	res := mapAt(want, "static_resources")
	named(res, "listeners", "llm")["address"] = sock("127.0.0.1", 1)
	for name, port := range map[string]int{"tokenwarden": 3, "fakellm": 4} {
		eps := mapAt(named(res, "clusters", name), "load_assignment")["endpoints"].([]any)
		lb := eps[0].(map[string]any)["lb_endpoints"].([]any)[0].(map[string]any)
		mapAt(lb, "endpoint")["address"] = sock("127.0.0.1", port)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rendered config differs from the shipped one beyond the four addresses:\n%s", out)
	}

	renamed := strings.Replace(string(shipped), "- name: fakellm", "- name: upstream", 1)
	if _, err := Render([]byte(renamed), a); err == nil || !strings.Contains(err.Error(), "fakellm") {
		t.Errorf("renamed cluster: got error %v, want one naming cluster fakellm", err)
	}
}
