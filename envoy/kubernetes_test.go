package envoy

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// clientLabels are headers tokenwarden reads that are not identity: a caller
// names its own agent run, and a run limit is scoped inside the verified tenant.
var clientLabels = []string{"x-agent-run-id"}

// kubeBase is the Kustomize base that deploys tokenwarden, which the Istio
// and Envoy Gateway configs point at. deploy/kubernetes's own tests render it
// with its components; these check the base's files against each other and
// against the proxy configs.
const kubeBase = "../deploy/kubernetes/base"

// kubeManifests returns the documents of the Kubernetes base by kind.
func kubeManifests(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(kubeBase, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]map[string]any{}
	for _, f := range files {
		for _, doc := range yamlDocs(t, readFile(t, f)) {
			kind := fmt.Sprint(doc["kind"])
			if _, dup := byKind[kind]; dup {
				t.Fatalf("%s: a second %s; these tests expect one of each", f, kind)
			}
			byKind[kind] = doc
		}
	}
	return byKind
}

// kubeTokenwardenConfig returns the tokenwarden config in the ConfigMap, parsed.
func kubeTokenwardenConfig(t *testing.T) (key string, cfg map[string]any, raw string) {
	t.Helper()
	data := path(t, kubeManifests(t)["ConfigMap"], "data").(map[string]any)
	if len(data) != 1 {
		t.Fatalf("ConfigMap data: got %d keys, want 1", len(data))
	}
	for k, v := range data {
		return k, yamlToMap(t, []byte(v.(string))), v.(string)
	}
	return
}

// identityHeadersOf lists the headers a tokenwarden config reads identity from,
// less the client labels.
func identityHeadersOf(t *testing.T, cfg map[string]any) []string {
	t.Helper()
	var hs []string
	for _, src := range path(t, cfg, "identity", "attributes").(map[string]any) {
		if h, ok := src.(map[string]any)["header"].(string); ok && !slices.Contains(clientLabels, h) {
			hs = append(hs, h)
		}
	}
	slices.Sort(hs)
	return hs
}

// kubeIdentityHeaders lists the identity headers of the Kubernetes config.
func kubeIdentityHeaders(t *testing.T) []string {
	t.Helper()
	_, cfg, _ := kubeTokenwardenConfig(t)
	return identityHeadersOf(t, cfg)
}

// service is what other manifests need to know of the tokenwarden Service.
type service struct {
	name, namespace string
	grpcPort        int
}

// kubeService returns the tokenwarden Service's name, namespace and gRPC port.
func kubeService(t *testing.T) service {
	t.Helper()
	svc := kubeManifests(t)["Service"]
	s := service{name: path(t, svc, "metadata", "name").(string), namespace: path(t, svc, "metadata", "namespace").(string)}
	for _, p := range path(t, svc, "spec", "ports").([]any) {
		if p.(map[string]any)["name"] == "grpc" {
			s.grpcPort = p.(map[string]any)["port"].(int)
		}
	}
	if s.grpcPort == 0 {
		t.Fatal("Service has no port named grpc")
	}
	return s
}

// portOf returns the port of a host:port address from the tokenwarden config.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKubernetesManifests checks the manifests agree with each other and with
// tokenwarden's contract: probes on the admin port, a gRPC Service port the
// meshes speak HTTP/2 to, the config file where the args say, a Redis store.
func TestKubernetesManifests(t *testing.T) {
	m := kubeManifests(t)
	for _, kind := range []string{"Namespace", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "Kustomization"} {
		if m[kind] == nil {
			t.Fatalf("no %s in "+kubeBase, kind)
		}
	}
	key, cfg, _ := kubeTokenwardenConfig(t)
	dep := m["Deployment"]
	podLabels := path(t, dep, "spec", "template", "metadata", "labels")
	containers := path(t, dep, "spec", "template", "spec", "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(containers))
	}
	c := containers[0]
	ports := map[string]int{}
	for _, p := range path(t, c, "ports").([]any) {
		ports[p.(map[string]any)["name"].(string)] = p.(map[string]any)["containerPort"].(int)
	}

	t.Run("store is redis", func(t *testing.T) {
		if got := path(t, cfg, "store", "type"); got != "redis" {
			t.Errorf("store.type: got %v, want redis (replicas must share counters)", got)
		}
	})

	t.Run("ports match the config", func(t *testing.T) {
		for name, addrKey := range map[string]string{"grpc": "listen", "admin": "admin"} {
			addr := path(t, cfg, addrKey).(string)
			if ports[name] != portOf(t, addr) {
				t.Errorf("container port %s: got %d, want %d (config %s: %s)", name, ports[name], portOf(t, addr), addrKey, addr)
			}
			if host, _, _ := net.SplitHostPort(addr); host != "0.0.0.0" && host != "" {
				t.Errorf("config %s: got %s, want 0.0.0.0 so the kubelet and the proxies reach it", addrKey, addr)
			}
		}
	})

	t.Run("probes", func(t *testing.T) {
		live := path(t, c, "livenessProbe", "httpGet").(map[string]any)
		if live["path"] != "/healthz" || live["port"] != "admin" {
			t.Errorf("livenessProbe: got %v, want path /healthz on port admin (a Redis outage must not restart pods)", live)
		}
		// Readiness must not follow the store: with /readyz, a Redis outage
		// makes every replica unready at once and Envoy fails every call
		// closed, even for limits with on_store_error: allow. It asks the
		// ext_proc port itself, through grpc.health.v1 (which also turns
		// NOT_SERVING when a drain starts).
		ready := path(t, c, "readinessProbe").(map[string]any)
		if hg, ok := ready["httpGet"].(map[string]any); ok && hg["path"] == "/readyz" {
			t.Errorf("readinessProbe: got httpGet %v, want a probe that does not depend on the store", hg)
		}
		grpcProbe, ok := ready["grpc"].(map[string]any)
		if !ok {
			t.Fatalf("readinessProbe: got %v, want a grpc probe on the ext_proc port", ready)
		}
		// Kubernetes accepts only a number here, not the port's name.
		if got, want := grpcProbe["port"], ports["grpc"]; got != want {
			t.Errorf("readinessProbe grpc port: got %v, want %d (containerPort grpc)", got, want)
		}
		// "" (or no service) is the overall status tokenwarden sets; another
		// name would have to be one the server registers.
		if svc, ok := grpcProbe["service"]; ok && svc != "" && svc != "envoy.service.ext_proc.v3.ExternalProcessor" {
			t.Errorf("readinessProbe grpc service: got %v, want \"\" or the ExternalProcessor service", svc)
		}
	})

	t.Run("config mounted where the args say", func(t *testing.T) {
		args := path(t, c, "args").([]any)
		i := slices.Index(args, any("-config"))
		if i < 0 || i+1 >= len(args) {
			t.Fatalf("args %v: want -config FILE", args)
		}
		mount := path(t, c, "volumeMounts", 0)
		vol := path(t, dep, "spec", "template", "spec", "volumes", 0)
		want := path(t, mount, "mountPath").(string) + "/" + key
		if args[i+1] != want {
			t.Errorf("-config %v, want %s (mountPath + ConfigMap key)", args[i+1], want)
		}
		if path(t, vol, "name") != path(t, mount, "name") || path(t, vol, "configMap", "name") != path(t, m["ConfigMap"], "metadata", "name") {
			t.Errorf("volume %v does not mount the ConfigMap %v", vol, path(t, m["ConfigMap"], "metadata", "name"))
		}
	})

	t.Run("service", func(t *testing.T) {
		svc := m["Service"]
		if !equalMaps(path(t, svc, "spec", "selector"), podLabels) {
			t.Errorf("Service selector %v does not match pod labels %v", path(t, svc, "spec", "selector"), podLabels)
		}
		var grpc map[string]any
		for _, p := range path(t, svc, "spec", "ports").([]any) {
			if p.(map[string]any)["name"] == "grpc" {
				grpc = p.(map[string]any)
			}
		}
		if grpc == nil || grpc["appProtocol"] != "grpc" || grpc["targetPort"] != "grpc" {
			t.Errorf("Service grpc port: got %v, want appProtocol grpc, targetPort grpc", grpc)
		}
	})

	t.Run("disruption budget", func(t *testing.T) {
		sel := path(t, m["PodDisruptionBudget"], "spec", "selector", "matchLabels")
		if !equalMaps(sel, podLabels) {
			t.Errorf("PodDisruptionBudget selector %v does not match pod labels %v", sel, podLabels)
		}
	})

	t.Run("kustomization lists every manifest", func(t *testing.T) {
		res := path(t, m["Kustomization"], "resources").([]any)
		files, _ := filepath.Glob(filepath.Join(kubeBase, "*.yaml"))
		for _, f := range files {
			base := filepath.Base(f)
			if base != "kustomization.yaml" && !slices.Contains(res, any(base)) {
				t.Errorf("kustomization.yaml does not list %s", base)
			}
		}
		for _, r := range res {
			if !fileExists(filepath.Join(kubeBase, r.(string))) {
				t.Errorf("kustomization.yaml lists %v, which does not exist", r)
			}
		}
	})

	t.Run("namespaces agree", func(t *testing.T) {
		want := path(t, m["Namespace"], "metadata", "name")
		for kind, doc := range m {
			if kind == "Namespace" || kind == "Kustomization" {
				continue
			}
			if got := path(t, doc, "metadata", "namespace"); got != want {
				t.Errorf("%s namespace: got %v, want %v", kind, got, want)
			}
		}
	})
}

// TestKubernetesConfigAccepted runs tokenwarden check-config on the ConfigMap's
// config.
func TestKubernetesConfigAccepted(t *testing.T) {
	_, _, raw := kubeTokenwardenConfig(t)
	checkConfig(t, writeTemp(t, "tokenwarden.yaml", []byte(raw)))
}

// checkConfig runs "go run ./cmd/tokenwarden check-config -config FILE" from the
// module root and fails the test when tokenwarden rejects the file.
func checkConfig(t *testing.T, file string) {
	t.Helper()
	if !fileExists("../cmd/tokenwarden/main.go") {
		t.Skip("cmd/tokenwarden does not exist yet")
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./cmd/tokenwarden", "check-config", "-config", abs)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tokenwarden check-config -config %s: %v\n%s", file, err, out)
	}
}

// equalMaps compares two decoded YAML mappings of strings.
func equalMaps(a, b any) bool {
	am, _ := a.(map[string]any)
	bm, _ := b.(map[string]any)
	if len(am) != len(bm) || am == nil {
		return false
	}
	for k, v := range am {
		if bm[k] != v {
			return false
		}
	}
	return true
}

// TestKubernetesShutdownCoversTheRoutes: on a rollout or a node drain,
// a stream that started before SIGTERM may run as long as its route
// lets it (the route timeout); tokenwarden's shutdown_grace in the
// Kubernetes config must let it finish, or it is cut mid-answer and
// settled on what was seen. (deploy/kubernetes's tests hold
// terminationGracePeriodSeconds above the grace.)
func TestKubernetesShutdownCoversTheRoutes(t *testing.T) {
	_, cfg, _ := kubeTokenwardenConfig(t)
	g, ok := cfg["shutdown_grace"].(string)
	if !ok {
		t.Fatal("the Kubernetes config sets no shutdown_grace: the server's 15s default cuts longer streams")
	}
	grace, err := time.ParseDuration(g)
	if err != nil {
		t.Fatal(err)
	}
	timeouts := map[string]time.Duration{}
	for i, r := range path(t, named(t, path(t, yamlToMap(t, readFile(t, "envoy.yaml")),
		"static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config", "route_config", "virtual_hosts"), "llm"), "routes").([]any) {
		d, err := time.ParseDuration(fmt.Sprint(path(t, r, "route", "timeout")))
		if err != nil {
			t.Fatalf("envoy.yaml route %d timeout: %v", i, err)
		}
		timeouts[fmt.Sprintf("envoy.yaml route %d", i)] = d
	}
	for _, doc := range yamlDocs(t, readFile(t, "gateway/httproute.yaml")) {
		for i, rule := range path(t, doc, "spec", "rules").([]any) {
			d, err := time.ParseDuration(fmt.Sprint(path(t, rule, "timeouts", "request")))
			if err != nil {
				t.Fatalf("gateway/httproute.yaml %v rule %d: %v", path(t, doc, "metadata", "name"), i, err)
			}
			timeouts[fmt.Sprintf("gateway/httproute.yaml %v rule %d", path(t, doc, "metadata", "name"), i)] = d
		}
	}
	for where, d := range timeouts {
		if d > grace || d == 0 {
			t.Errorf("%s: timeout %v, longer than the Kubernetes shutdown_grace %v (0 is none)", where, d, grace)
		}
	}
}
