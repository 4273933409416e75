package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/tokenwarden/tokenwarden/internal/bodybudget"
)

// The package's directories, and where the tests mount them in memory.
const (
	mount     = "/k"
	namespace = "tokenwarden"
)

// combinations are the overlays the tests render: the base with each set of
// components, written in memory beside the real directories.
var combinations = map[string][]string{
	"base":            nil,
	"with-redis":      {"redis"},
	"with-monitoring": {"monitoring"},
	"with-both":       {"redis", "monitoring"},
}

// memFS copies this directory's YAML files into an in-memory file system
// under mount, and adds an overlay for each combination.
func memFS(t *testing.T) filesys.FileSystem {
	t.Helper()
	fs := filesys.MakeFsInMemory()
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".yaml" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return fs.WriteFile(filepath.Join(mount, p), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, comps := range combinations {
		var b strings.Builder
		b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../base\n")
		if len(comps) > 0 {
			b.WriteString("components:\n")
			for _, c := range comps {
				fmt.Fprintf(&b, "- ../../components/%s\n", c)
			}
		}
		if err := fs.WriteFile(filepath.Join(mount, "test", name, "kustomization.yaml"), []byte(b.String())); err != nil {
			t.Fatal(err)
		}
	}
	return fs
}

// objects are rendered manifests by kind and name.
type objects map[string]map[string]any

func (o objects) get(t *testing.T, kind, name string) map[string]any {
	t.Helper()
	obj, ok := o[kind+"/"+name]
	if !ok {
		t.Fatalf("no %s %s in the rendered manifests (have %v)", kind, name, o.ids())
	}
	return obj
}

func (o objects) has(kind, name string) bool { _, ok := o[kind+"/"+name]; return ok }

func (o objects) ids() []string {
	var ids []string
	for id := range o {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// render runs Kustomize on dir of fs.
func render(t *testing.T, fs filesys.FileSystem, dir string) objects {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs := objects{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint(doc["kind"]) + "/" + fmt.Sprint(at(t, doc, "metadata", "name"))
		if _, dup := objs[id]; dup {
			t.Fatalf("%s rendered twice", id)
		}
		objs[id] = doc
	}
	return objs
}

// at walks a decoded YAML value along keys and list indexes.
func at(t *testing.T, v any, steps ...any) any {
	t.Helper()
	for i, s := range steps {
		switch k := s.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: got %T, want a mapping", steps[:i], v)
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("at %v: no key %q", steps[:i], k)
			}
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("at %v: got %v, want a list with index %d", steps[:i], v, k)
			}
			v = l[k]
		}
	}
	return v
}

// subset reports whether every key of a has the same value in b.
func subset(a, b any) bool {
	am, _ := a.(map[string]any)
	bm, _ := b.(map[string]any)
	if len(am) == 0 {
		return false
	}
	for k, v := range am {
		if bm[k] != v {
			return false
		}
	}
	return true
}

// tokenwardenConfig returns the config file the Deployment mounts.
func tokenwardenConfig(t *testing.T, objs objects) (map[string]any, string) {
	t.Helper()
	dep := objs.get(t, "Deployment", "tokenwarden")
	cm := at(t, dep, "spec", "template", "spec", "volumes", 0, "configMap", "name").(string)
	raw, ok := at(t, objs.get(t, "ConfigMap", cm), "data").(map[string]any)["tokenwarden.yaml"].(string)
	if !ok {
		t.Fatalf("ConfigMap %s has no tokenwarden.yaml", cm)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg, raw
}

// containerPorts returns the tokenwarden container's ports by name.
func containerPorts(t *testing.T, objs objects) map[string]int {
	t.Helper()
	ports := map[string]int{}
	for _, p := range at(t, objs.get(t, "Deployment", "tokenwarden"), "spec", "template", "spec", "containers", 0, "ports").([]any) {
		ports[p.(map[string]any)["name"].(string)] = p.(map[string]any)["containerPort"].(int)
	}
	return ports
}

// servicePort returns the port of a Service with the given name.
func servicePort(t *testing.T, svc map[string]any, name string) map[string]any {
	t.Helper()
	for _, p := range at(t, svc, "spec", "ports").([]any) {
		if p.(map[string]any)["name"] == name {
			return p.(map[string]any)
		}
	}
	t.Fatalf("Service %v has no port %q", at(t, svc, "metadata", "name"), name)
	return nil
}

// TestRenderCombinations renders the base with every set of components and
// checks what each piece promises.
func TestRenderCombinations(t *testing.T) {
	fs := memFS(t)
	for name, comps := range combinations {
		t.Run(name, func(t *testing.T) {
			objs := render(t, fs, filepath.Join(mount, "test", name))
			checkCommon(t, objs)
			if slices.Contains(comps, "redis") {
				checkRedis(t, objs)
			} else if objs.has("StatefulSet", "redis") {
				t.Error("a Redis without the redis component")
			}
			if slices.Contains(comps, "monitoring") {
				checkMonitoring(t, objs)
			} else if objs.has("ServiceMonitor", "tokenwarden") {
				t.Error("a ServiceMonitor without the monitoring component")
			}
		})
	}
}

// TestRenderExample renders the example overlay: everything, with its own
// config file and image.
func TestRenderExample(t *testing.T) {
	objs := render(t, memFS(t), filepath.Join(mount, "example"))
	checkCommon(t, objs)
	checkRedis(t, objs)
	checkMonitoring(t, objs)
	_, raw := tokenwardenConfig(t, objs)
	want, err := os.ReadFile("example/tokenwarden.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if raw != string(want) {
		t.Errorf("the mounted config is not example/tokenwarden.yaml:\n%s", raw)
	}
	checkConfig(t, raw)
}

// TestBaseConfigAccepted runs tokenwarden check-config on the base's config.
func TestBaseConfigAccepted(t *testing.T) {
	_, raw := tokenwardenConfig(t, render(t, memFS(t), filepath.Join(mount, "base")))
	checkConfig(t, raw)
}

// releaseImage is what a release publishes: the image by its version tag.
// ":latest", or no tag, names an image whose content changes under the
// same name, and makes the kubelet pull on every start.
var releaseImage = regexp.MustCompile(`^ghcr\.io/tokenwarden/tokenwarden:v[0-9]+\.[0-9]+\.[0-9]+$`)

// checkCommon: one namespace; the Deployment runs the release image,
// mounts a ConfigMap that exists, with the ports its config listens on,
// and is given the time its shutdown takes.
func checkCommon(t *testing.T, objs objects) {
	t.Helper()
	dep := objs.get(t, "Deployment", "tokenwarden")
	c := at(t, dep, "spec", "template", "spec", "containers", 0).(map[string]any)
	if img := fmt.Sprint(c["image"]); !releaseImage.MatchString(img) {
		t.Errorf("image: got %s, want the release image by version (%s)", img, releaseImage)
	}
	if p := c["imagePullPolicy"]; p == "Always" {
		t.Errorf("imagePullPolicy %v: a versioned image needs no pull on every start", p)
	}
	checkShutdown(t, objs)
	objs.get(t, "Namespace", namespace)
	for id, o := range objs {
		if strings.HasPrefix(id, "Namespace/") {
			continue
		}
		if ns := at(t, o, "metadata").(map[string]any)["namespace"]; ns != namespace {
			t.Errorf("%s: namespace %v, want %s", id, ns, namespace)
		}
	}
	cfg, _ := tokenwardenConfig(t, objs)
	ports := containerPorts(t, objs)
	for key, port := range map[string]string{"listen": "grpc", "admin": "admin"} {
		_, p, err := net.SplitHostPort(at(t, cfg, key).(string))
		if err != nil || fmt.Sprint(ports[port]) != p {
			t.Errorf("config %s %v, want the container port %s (%d)", key, at(t, cfg, key), port, ports[port])
		}
	}
	svc := objs.get(t, "Service", "tokenwarden")
	if !subset(at(t, svc, "spec", "selector"), at(t, objs.get(t, "Deployment", "tokenwarden"), "spec", "template", "metadata", "labels")) {
		t.Error("the tokenwarden Service does not select the Deployment's pods")
	}
}

// settleMargin is the least time the kubelet must leave a pod after its
// shutdown grace: the settlement of the streams the grace cut, and the
// process's exit.
const settleMargin = 10 * time.Second

// checkShutdown: the kubelet waits for the preStop sleep and the whole of
// tokenwarden's shutdown_grace, and then some, before it kills the pod.
// (That the grace covers the routes' timeout is the envoy package's test:
// it has the routes.)
func checkShutdown(t *testing.T, objs objects) {
	t.Helper()
	cfg, _ := tokenwardenConfig(t, objs)
	grace := 15 * time.Second // the server's default
	if g, ok := cfg["shutdown_grace"].(string); ok {
		var err error
		if grace, err = time.ParseDuration(g); err != nil {
			t.Fatalf("shutdown_grace %q: %v", g, err)
		}
	}
	spec := at(t, objs.get(t, "Deployment", "tokenwarden"), "spec", "template", "spec")
	preStop := time.Duration(at(t, spec, "containers", 0, "lifecycle", "preStop", "sleep", "seconds").(int)) * time.Second
	kill := time.Duration(at(t, spec, "terminationGracePeriodSeconds").(int)) * time.Second
	if kill < preStop+grace+settleMargin {
		t.Errorf("terminationGracePeriodSeconds %v, want at least the preStop sleep %v + shutdown_grace %v + %v to settle", kill, preStop, grace, settleMargin)
	}
}

// TestBaseNamesItsImageOnce: the Deployment names the image without a
// registry or tag; the base's kustomization.yaml sets both, so that a
// release changes one line.
func TestBaseNamesItsImageOnce(t *testing.T) {
	b, err := os.ReadFile("base/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var dep map[string]any
	if err := yaml.Unmarshal(b, &dep); err != nil {
		t.Fatal(err)
	}
	img := fmt.Sprint(at(t, dep, "spec", "template", "spec", "containers", 0, "image"))
	if strings.ContainsAny(img, ":/@") {
		t.Errorf("base/deployment.yaml image %q: want the bare name, with registry and tag in kustomization.yaml's images", img)
	}
}

// checkRedis: the component's Redis is where the config points, keeps its
// data and never evicts.
func checkRedis(t *testing.T, objs objects) {
	t.Helper()
	sts := objs.get(t, "StatefulSet", "redis")
	svc := objs.get(t, "Service", "redis")
	podLabels := at(t, sts, "spec", "template", "metadata", "labels")
	if !subset(at(t, svc, "spec", "selector"), podLabels) || !subset(at(t, sts, "spec", "selector", "matchLabels"), podLabels) {
		t.Error("the redis Service or StatefulSet selector does not match the Redis pods")
	}
	if strings.Contains(fmt.Sprint(podLabels), "app.kubernetes.io/name:tokenwarden") {
		t.Error("the Redis pods carry tokenwarden's name label: the tokenwarden Service would select them")
	}
	cfg, _ := tokenwardenConfig(t, objs)
	u, err := url.Parse(at(t, cfg, "store", "redis", "url").(string))
	if err != nil {
		t.Fatal(err)
	}
	wantHost := fmt.Sprintf("%s.%s.svc.cluster.local", at(t, svc, "metadata", "name"), at(t, svc, "metadata", "namespace"))
	if u.Hostname() != wantHost || u.Port() != fmt.Sprint(servicePort(t, svc, "redis")["port"]) {
		t.Errorf("store.redis.url %s, want the redis Service %s:%v", u, wantHost, servicePort(t, svc, "redis")["port"])
	}
	args := fmt.Sprint(at(t, sts, "spec", "template", "spec", "containers", 0, "args"))
	for _, want := range []string{"--maxmemory-policy noeviction", "--appendonly yes"} {
		if !strings.Contains(args, want) {
			t.Errorf("redis args %s lack %q", args, want)
		}
	}
	claim := at(t, sts, "spec", "volumeClaimTemplates", 0, "metadata", "name")
	if mount := at(t, sts, "spec", "template", "spec", "containers", 0, "volumeMounts", 0, "name"); mount != claim {
		t.Errorf("redis mounts %v, want its volume claim %v", mount, claim)
	}
}

// checkMonitoring: the ServiceMonitor scrapes the admin port, as job
// "tokenwarden", and the PrometheusRule carries the rule file's alerts.
func checkMonitoring(t *testing.T, objs objects) {
	t.Helper()
	svc := objs.get(t, "Service", "tokenwarden")
	sm := objs.get(t, "ServiceMonitor", "tokenwarden")
	if !subset(at(t, sm, "spec", "selector", "matchLabels"), at(t, svc, "metadata", "labels")) {
		t.Error("the ServiceMonitor does not select the tokenwarden Service")
	}
	port := servicePort(t, svc, at(t, sm, "spec", "endpoints", 0, "port").(string))
	if port["targetPort"] != "admin" {
		t.Errorf("the ServiceMonitor scrapes port %v, want the one to the container's admin port", port)
	}
	if p := at(t, sm, "spec", "endpoints", 0).(map[string]any)["path"]; p != "/metrics" {
		t.Errorf("ServiceMonitor path %v, want /metrics", p)
	}
	// The alerts select job="tokenwarden": the Service's name, which the
	// Prometheus Operator uses as the job unless jobLabel says otherwise.
	if _, ok := at(t, sm, "spec").(map[string]any)["jobLabel"]; ok || at(t, svc, "metadata", "name") != "tokenwarden" {
		t.Error("the scrape job would not be named tokenwarden, which the alerts assume")
	}

	data, err := os.ReadFile("../prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules map[string]any
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	got := at(t, objs.get(t, "PrometheusRule", "tokenwarden"), "spec", "groups")
	if !reflect.DeepEqual(got, rules["groups"]) {
		t.Error("the PrometheusRule's groups differ from deploy/prometheus/alerts.yaml: edit both together")
	}
}

// TestKustomizationsListTheirFiles checks each kustomization names every
// YAML file beside it, as a resource or a generator's file, so none is
// forgotten.
func TestKustomizationsListTheirFiles(t *testing.T) {
	ks, err := filepath.Glob("*/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("components/*/kustomization.yaml")
	ks = append(ks, more...)
	if len(ks) < 4 {
		t.Fatalf("found only %v", ks)
	}
	for _, k := range ks {
		data, err := os.ReadFile(k)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Resources          []string `yaml:"resources"`
			ConfigMapGenerator []struct {
				Files []string `yaml:"files"`
			} `yaml:"configMapGenerator"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		listed := slices.Clone(doc.Resources)
		for _, g := range doc.ConfigMapGenerator {
			listed = append(listed, g.Files...)
		}
		files, _ := filepath.Glob(filepath.Join(filepath.Dir(k), "*.yaml"))
		for _, f := range files {
			if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(listed, base) {
				t.Errorf("%s does not use %s", k, base)
			}
		}
	}
}

// checkConfig runs "tokenwarden check-config" on a config.
func checkConfig(t *testing.T, raw string) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to run tokenwarden check-config")
	}
	file := filepath.Join(t.TempDir(), "tokenwarden.yaml")
	if err := os.WriteFile(file, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./cmd/tokenwarden", "check-config", "-config", file)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tokenwarden check-config: %v\n%s", err, out)
	}
}

// TestMemorySizedFromTheBudget: the pod's memory is sized from the request
// bodies a replica may hold at once. GOMEMLIMIT is set, and the budget
// tokenwarden derives from it gives one principal room for the largest body
// the shipped Envoy buffers; the pod's limit leaves room beyond GOMEMLIMIT
// for what the Go runtime does not count; the request is the limit, so that
// the node never takes memory back from a replica that holds bodies.
func TestMemorySizedFromTheBudget(t *testing.T) {
	objs := render(t, memFS(t), filepath.Join(mount, "base"))
	c := at(t, objs.get(t, "Deployment", "tokenwarden"), "spec", "template", "spec", "containers", 0)
	var goLimit int64
	for _, e := range at(t, c, "env").([]any) {
		if e.(map[string]any)["name"] == "GOMEMLIMIT" {
			goLimit = byteQuantity(t, fmt.Sprint(e.(map[string]any)["value"]))
		}
	}
	if goLimit == 0 {
		t.Fatal("the container sets no GOMEMLIMIT")
	}
	limit := byteQuantity(t, fmt.Sprint(at(t, c, "resources", "limits", "memory")))
	if req := byteQuantity(t, fmt.Sprint(at(t, c, "resources", "requests", "memory"))); req != limit {
		t.Errorf("memory request %d, want the limit, %d", req, limit)
	}
	if goLimit*9/8 > limit {
		t.Errorf("GOMEMLIMIT %d leaves less than a ninth of the %d-byte limit to what the runtime does not count", goLimit, limit)
	}
	inFlight, share := bodybudget.Default(goLimit)
	if envoyLimit := envoyBufferLimit(t); share < envoyLimit {
		t.Errorf("a principal's share of the %d bytes in flight is %d, less than the %d-byte bodies Envoy buffers", inFlight, share, envoyLimit)
	}
	if bodybudget.Copies*inFlight > goLimit {
		t.Errorf("%d bytes in flight, %d copies each, do not fit GOMEMLIMIT %d", inFlight, bodybudget.Copies, goLimit)
	}
}

// byteQuantity reads a memory size as Kubernetes (1152Mi, 1Gi) or
// GOMEMLIMIT (1024MiB) writes it.
func byteQuantity(t *testing.T, q string) int64 {
	t.Helper()
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}, {"B", 0}, {"", 0}} {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("memory size %q: %v", q, err)
			}
			return v << u.shift
		}
	}
	return 0
}

// envoyBufferLimit returns the request_body_buffer_limit of the shipped
// envoy.yaml: the largest request body Envoy hands tokenwarden.
func envoyBufferLimit(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("../../envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*request_body_buffer_limit:\s*(\d+)\s*$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("envoy/envoy.yaml sets no request_body_buffer_limit")
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}
