package envoy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// This file runs the shipped Envoy Gateway files (gateway/) through Envoy
// Gateway's own translator, egctl x translate, together with what a
// platform team already has — a GatewayClass, a Gateway, another
// application's HTTPRoute — and the Kubernetes Service tokenwarden's base
// ships; it checks where each policy attached, then runs the Envoy config
// the translator made in the real Envoy 1.40 in front of tokenwarden and
// fakellm, and sends traffic.
//
// egctl is built from the nested module envoy/meshtest (Envoy Gateway's
// module is far too large for this module's go.mod): .ci/test builds it
// and sets EGCTL; by hand,
//
//	EGCTL=$(go -C envoy/meshtest/egctl tool -n egctl) go test ./envoy -run TestEnvoyGatewayTranslated

// egGatewayNamespace and egGatewayName are the Gateway the shipped files
// name (gateway/httproute.yaml's parentRefs, traffic-policies.yaml's
// ClientTrafficPolicy).
const (
	egGatewayNamespace = "gateway"
	egGatewayName      = "eg"
	egLLMHost          = "llm.example.com"
	egAppHost          = "app.example.com"
)

// egctlBinary returns $EGCTL, skipping the test without it: building
// egctl is the nested module's business (.ci/test sets EGCTL).
func egctlBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs Envoy Gateway's translator and Envoy")
	}
	p := os.Getenv("EGCTL")
	if p == "" {
		t.Skip("EGCTL is not set (EGCTL=$(go -C envoy/meshtest/egctl tool -n egctl))")
	}
	return p
}

// The cluster IPs the test gives the Services: egctl routes to a Service's
// cluster IP and port (Envoy Gateway's service routing), which egBootstrap
// then moves to where the process really listens. Loopback addresses, so
// that nothing could leave the machine.
const (
	egTokenwardenIP = "127.0.0.11"
	egUpstreamIP    = "127.0.0.12"
	egAppIP         = "127.0.0.13"
)

// egInput is what the translator is given: the platform's own resources,
// the shipped files as they are but for the identity provider (the demo
// issuer and its key, in place of issuer.example.com's JWKS, which this
// machine cannot fetch) and the ext_proc message timeout (see below), the
// Kubernetes base's tokenwarden Service, and
// Services for the LLM upstream and the other application, each with a
// cluster IP as a cluster would assign it.
func egInput(t *testing.T) []byte {
	t.Helper()
	var docs []map[string]any
	add := func(d ...map[string]any) { docs = append(docs, d...) }
	add(map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": "eg"},
		"spec":     map[string]any{"controllerName": "gateway.envoyproxy.io/gatewayclass-controller"},
	}, map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": egGatewayName, "namespace": egGatewayNamespace},
		"spec": map[string]any{"gatewayClassName": "eg", "listeners": []any{map[string]any{
			"name": "http", "protocol": "HTTP", "port": 80,
			"allowedRoutes": map[string]any{"namespaces": map[string]any{"from": "All"}},
		}}},
	})
	for _, ns := range []string{egGatewayNamespace, "llm", "tokenwarden", "app"} {
		add(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}})
	}
	files, err := filepath.Glob("gateway/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("gateway/*.yaml: %v", err)
	}
	demo := demoProvider(t)
	for _, f := range files {
		for _, d := range yamlDocs(t, readFile(t, f)) {
			if d["kind"] == "EnvoyExtensionPolicy" {
				// The shipped 1 s per message is a tuning value, not what
				// this test checks; a shared, loaded machine can take
				// longer than that over a 40 MB body, and a test must not
				// fail on timing.
				for _, e := range path(t, d, "spec", "extProc").([]any) {
					e.(map[string]any)["messageTimeout"] = "60s"
				}
			}
			if d["kind"] == "SecurityPolicy" {
				for _, p := range path(t, d, "spec", "jwt", "providers").([]any) {
					p := p.(map[string]any)
					delete(p, "remoteJWKS")
					p["issuer"] = demo.GetIssuer()
					p["audiences"] = demo.GetAudiences()
					p["localJWKS"] = map[string]any{"type": "Inline", "inline": demo.GetLocalJwks().GetInlineString()}
				}
			}
			add(d)
		}
	}
	add(egDocsPatchPolicy(t))
	svc := kubeManifests(t)["Service"]
	svc["spec"].(map[string]any)["clusterIP"] = egTokenwardenIP
	add(svc)
	add(egService("llm", "llm-upstream", egUpstreamIP, 8081), egService("app", "app", egAppIP, 80))
	add(map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "app", "namespace": "app"},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": egGatewayName, "namespace": egGatewayNamespace}},
			"hostnames":  []any{egAppHost},
			"rules": []any{map[string]any{
				"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}},
				"backendRefs": []any{map[string]any{"name": "app", "port": 80}},
			}},
		},
	})
	var b bytes.Buffer
	for _, d := range docs {
		b.WriteString("---\n")
		out, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(out)
	}
	return b.Bytes()
}

// egDocsPatchPolicy is the EnvoyPatchPolicy docs/integration.md gives for
// wait_up_to: the ext_proc filter's max_message_timeout, which Envoy
// Gateway's API lacks.
func egDocsPatchPolicy(t *testing.T) map[string]any {
	t.Helper()
	doc := string(readFile(t, "../docs/integration.md"))
	for _, block := range strings.Split(doc, "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "kind: EnvoyPatchPolicy") {
			return yamlToMap(t, []byte(block))
		}
	}
	t.Fatal("docs/integration.md has no EnvoyPatchPolicy")
	return nil
}

func egService(ns, name, clusterIP string, port int) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"clusterIP": clusterIP,
			"ports": []any{map[string]any{"name": "http", "port": port, "protocol": "TCP"}}},
	}
}

// egTranslate runs egctl x translate on input and returns the resources
// with their status, and the xDS config of the Gateway.
func egTranslate(t *testing.T, egctl string, input []byte) (map[string]any, map[string]any) {
	t.Helper()
	in := writeTemp(t, "gateway-input.yaml", input)
	cmd := exec.Command(egctl, "x", "translate", "--from", "gateway-api", "--to", "gateway-api,xds", "-t", "all", "-f", in, "-o", "yaml")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("egctl x translate: %v\n%s", err, stderr.Bytes())
	}
	doc := yamlToMap(t, out)
	xds, ok := path(t, doc, "xds").(map[string]any)[egGatewayNamespace+"/"+egGatewayName].(map[string]any)
	if !ok {
		t.Fatalf("no xDS for Gateway %s/%s in:\n%.2000s", egGatewayNamespace, egGatewayName, out)
	}
	return doc, xds
}

// egConditions returns the conditions in a resource's status by the
// parent or ancestor they are about ("" for the Gateway's own).
func egAccepted(t *testing.T, obj map[string]any) (bool, string) {
	t.Helper()
	st, _ := obj["status"].(map[string]any)
	var lists []any
	for _, key := range []string{"ancestors", "parents"} {
		if l, ok := st[key].([]any); ok {
			lists = append(lists, l...)
		}
	}
	if c, ok := st["conditions"].([]any); ok {
		lists = append(lists, map[string]any{"conditions": c})
	}
	if len(lists) == 0 {
		return false, "no status"
	}
	var why []string
	for _, a := range lists {
		for _, c := range a.(map[string]any)["conditions"].([]any) {
			c := c.(map[string]any)
			if (c["type"] == "Accepted" || c["type"] == "ResolvedRefs") && c["status"] != "True" {
				why = append(why, fmt.Sprintf("%v=%v: %v", c["type"], c["status"], c["message"]))
			}
		}
	}
	return len(why) == 0, strings.Join(why, "; ")
}

// egBootstrap turns the translator's xDS (a config dump: listeners, route
// configs, clusters and endpoints as a management server would send them)
// into a static bootstrap: each listener's RDS reference replaced by its
// route config, each EDS cluster made STATIC with its endpoints, each
// endpoint moved from the Service's cluster IP and port to the address in
// moves (every one must be there), the listener and the admin interface on
// loopback port 0.
func egBootstrap(t *testing.T, xds map[string]any, moves map[string]string) []byte {
	t.Helper()
	var listeners, clusters []any
	routes := map[string]any{}
	endpoints := map[string]any{}
	for _, c := range path(t, xds, "configs").([]any) {
		c := c.(map[string]any)
		switch c["@type"] {
		case "type.googleapis.com/envoy.admin.v3.ListenersConfigDump":
			for _, l := range c["dynamicListeners"].([]any) {
				// The Gateway's listeners, not Envoy Gateway's own (its
				// readiness and stats listeners).
				l := path(t, l, "activeState", "listener").(map[string]any)
				if strings.HasPrefix(fmt.Sprint(l["name"]), egGatewayNamespace+"/"+egGatewayName+"/") {
					listeners = append(listeners, l)
				}
			}
		case "type.googleapis.com/envoy.admin.v3.RoutesConfigDump":
			for _, r := range c["dynamicRouteConfigs"].([]any) {
				rc := path(t, r, "routeConfig").(map[string]any)
				routes[rc["name"].(string)] = rc
			}
		case "type.googleapis.com/envoy.admin.v3.ClustersConfigDump":
			for _, cl := range c["dynamicActiveClusters"].([]any) {
				clusters = append(clusters, path(t, cl, "cluster"))
			}
		case "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump":
			for _, e := range c["dynamicEndpointConfigs"].([]any) {
				la := path(t, e, "endpointConfig").(map[string]any)
				endpoints[la["clusterName"].(string)] = la
			}
		}
	}
	if len(listeners) != 1 {
		t.Fatalf("got %d listeners, want the Gateway's one HTTP listener", len(listeners))
	}
	for _, l := range listeners {
		l := l.(map[string]any)
		l["address"] = map[string]any{"socketAddress": map[string]any{"address": "127.0.0.1", "portValue": 0}}
		for _, fc := range filterChainsOf(l) {
			for _, f := range fc["filters"].([]any) {
				tc, _ := f.(map[string]any)["typedConfig"].(map[string]any)
				rds, ok := tc["rds"].(map[string]any)
				if !ok {
					continue
				}
				rc, ok := routes[rds["routeConfigName"].(string)]
				if !ok {
					t.Fatalf("no route config %v", rds["routeConfigName"])
				}
				delete(tc, "rds")
				delete(rc.(map[string]any), "@type")
				tc["routeConfig"] = rc
			}
		}
	}
	for _, c := range clusters {
		c := c.(map[string]any)
		if c["type"] != "EDS" {
			continue
		}
		name := c["name"].(string)
		la, ok := endpoints[name]
		if !ok {
			t.Fatalf("cluster %s: no endpoints", name)
		}
		delete(c, "edsClusterConfig")
		delete(la.(map[string]any), "@type")
		c["type"] = "STATIC"
		c["loadAssignment"] = la
		for _, lle := range la.(map[string]any)["endpoints"].([]any) {
			for _, le := range lle.(map[string]any)["lbEndpoints"].([]any) {
				sa := path(t, le, "endpoint", "address", "socketAddress").(map[string]any)
				from := fmt.Sprintf("%v:%v", sa["address"], sa["portValue"])
				to, ok := moves[from]
				if !ok {
					t.Fatalf("cluster %s: endpoint %s is none of the test's Services", name, from)
				}
				sa["address"], sa["portValue"] = "127.0.0.1", portOfAddr(t, to)
			}
		}
	}
	// In the dump each resource is an Any; in a bootstrap it is the
	// message itself.
	for _, l := range listeners {
		delete(l.(map[string]any), "@type")
	}
	for _, c := range clusters {
		delete(c.(map[string]any), "@type")
	}
	b, err := json.Marshal(map[string]any{
		"admin":           map[string]any{"address": map[string]any{"socketAddress": map[string]any{"address": "127.0.0.1", "portValue": 0}}},
		"staticResources": map[string]any{"listeners": listeners, "clusters": clusters},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// filterChainsOf returns a listener's filter chains, its default one
// included.
func filterChainsOf(l map[string]any) []map[string]any {
	var out []map[string]any
	if fcs, ok := l["filterChains"].([]any); ok {
		for _, fc := range fcs {
			out = append(out, fc.(map[string]any))
		}
	}
	if fc, ok := l["defaultFilterChain"].(map[string]any); ok {
		out = append(out, fc)
	}
	return out
}

// egTokenwardenConfig is the Kubernetes ConfigMap's config with a memory
// store, and its limits replaced by two the test reads: requests per
// tenant (so a metered call shows in x-ratelimit-remaining-requests) and
// a tokens limit a 40 MB prompt fits in.
func egTokenwardenConfig(t *testing.T) []byte {
	t.Helper()
	_, cfg, _ := kubeTokenwardenConfig(t)
	cfg["store"] = map[string]any{"type": "memory"}
	cfg["log"] = map[string]any{"level": "debug"}
	cfg["limits"] = []any{
		map[string]any{"name": "eg-tenant-requests", "dimension": "requests", "scope": []any{"tenant"}, "algorithm": "fixed_window", "limit": 1000, "window": "31d"},
		map[string]any{"name": "eg-tenant-tokens", "dimension": "tokens", "scope": []any{"tenant"}, "algorithm": "fixed_window", "limit": 100000000, "window": "31d"},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEnvoyGatewayTranslated: the shipped Envoy Gateway files, as Envoy
// Gateway's translator makes them, on a Gateway that also serves another
// application:
//
//   - every shipped policy and route is accepted, on the Gateway and route
//     the files name, across their namespaces;
//   - the ext_proc cluster buffers a whole request body (≥ 64 MiB) and
//     checks tokenwarden's gRPC health;
//
// and through the real Envoy 1.40 on that config, with tokenwarden on the
// Kubernetes config, fakellm and the other application behind it:
//
//   - an LLM call is metered (its requests limit counts it);
//   - the other application's requests reach it untouched, without a
//     token, and tokenwarden never sees them;
//   - a 40 MB prompt is accepted and reaches the provider whole;
//   - a client's own identity header, without a token, is not believed.
func TestEnvoyGatewayTranslated(t *testing.T) {
	egctl := egctlBinary(t)
	r := e2e(t)

	tw, err := startE2EProc(r.dir, "tokenwarden-eg", r.twBin, "-config", writeTemp(t, "tokenwarden.yaml", egTokenwardenConfig(t)),
		"-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tw.kill)
	started, err := tw.awaitLog("tokenwarden started", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	twListen, _ := started["listen"].(string)
	twAdmin, _ := started["admin"].(string)

	res, xds := egTranslate(t, egctl, egInput(t))

	t.Run("every policy attached", func(t *testing.T) {
		for _, kind := range []string{"httpRoutes", "clientTrafficPolicies", "backendTrafficPolicies", "securityPolicies", "envoyExtensionPolicies", "envoyPatchPolicies"} {
			objs, _ := res[kind].([]any)
			if len(objs) == 0 {
				t.Errorf("%s: none in the translator's output", kind)
			}
			for _, o := range objs {
				o := o.(map[string]any)
				if ok, why := egAccepted(t, o); !ok {
					t.Errorf("%s %v/%v: not accepted: %s", kind, path(t, o, "metadata", "namespace"), path(t, o, "metadata", "name"), why)
				}
			}
		}
	})

	boot := egBootstrap(t, xds, map[string]string{
		egTokenwardenIP + ":" + strconv.Itoa(kubeService(t).grpcPort): twListen,
		egUpstreamIP + ":8081": r.llmAddr,
		egAppIP + ":80":        r.app.addr,
	})
	t.Run("the documented patch sets max_message_timeout", func(t *testing.T) {
		var found []string
		for _, l := range path(t, yamlToMap(t, boot), "staticResources", "listeners").([]any) {
			for _, fc := range filterChainsOf(l.(map[string]any)) {
				for _, f := range fc["filters"].([]any) {
					hf, _ := path(t, f, "typedConfig").(map[string]any)["httpFilters"].([]any)
					for _, h := range hf {
						h := h.(map[string]any)
						if strings.HasPrefix(h["name"].(string), "envoy.filters.http.ext_proc") {
							found = append(found, fmt.Sprintf("%v: %v", h["name"], path(t, h, "typedConfig").(map[string]any)["maxMessageTimeout"]))
						}
					}
				}
			}
		}
		if len(found) == 0 || !strings.HasSuffix(found[0], ": 11s") || len(found) != 1 {
			t.Errorf("ext_proc filters: got %v, want one, with max_message_timeout 11s", found)
		}
	})

	t.Run("the ext_proc cluster", func(t *testing.T) {
		var cluster map[string]any
		for _, c := range path(t, yamlToMap(t, boot), "staticResources", "clusters").([]any) {
			c := c.(map[string]any)
			if strings.Contains(c["name"].(string), "envoyextensionpolicy/llm/tokenwarden") {
				cluster = c
			}
		}
		if cluster == nil {
			t.Fatal("no cluster for the EnvoyExtensionPolicy's backend")
		}
		if got, _ := strconv.Atoi(fmt.Sprint(cluster["perConnectionBufferLimitBytes"])); got < 64<<20 {
			t.Errorf("perConnectionBufferLimitBytes: got %v, want at least 64 MiB (a 48 MiB body in one message)", cluster["perConnectionBufferLimitBytes"])
		}
		hcs, _ := cluster["healthChecks"].([]any)
		if len(hcs) != 1 || hcs[0].(map[string]any)["grpcHealthCheck"] == nil {
			t.Errorf("healthChecks: got %v, want one grpc health check", hcs)
		}
	})

	cfg := writeTemp(t, "envoy-eg.json", boot)
	adminFile := filepath.Join(t.TempDir(), "admin")
	envoy, err := startE2EProc(r.dir, "envoy-eg", envoyBinary(t), "-c", cfg, "--disable-hot-restart", "--concurrency", "2",
		"--log-level", "warn", "--admin-address-path", adminFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(envoy.kill)
	listen := egAwaitEnvoy(t, envoy, adminFile)

	call := func(t *testing.T, host, p, token string, body []byte, headers ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+listen+p, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("content-type", "application/json")
		if token != "" {
			req.Header.Set("authorization", "Bearer "+token)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	c := newE2ECaller(t)
	chat := e2eChat(t, "Hello there.", 50, false)

	t.Run("the LLM route is metered", func(t *testing.T) {
		var remaining []int
		for range 2 {
			resp, body := call(t, egLLMHost, "/v1/chat/completions", c.token, chat, e2eFixedUsage...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			n, err := strconv.Atoi(resp.Header.Get("x-ratelimit-remaining-requests"))
			if err != nil {
				t.Fatalf("x-ratelimit-remaining-requests: %q", resp.Header.Get("x-ratelimit-remaining-requests"))
			}
			remaining = append(remaining, n)
		}
		if remaining[1] != remaining[0]-1 {
			t.Errorf("remaining requests: got %v, want one fewer on the second call", remaining)
		}
	})

	t.Run("the other application is untouched", func(t *testing.T) {
		before := egTwRequests(t, twAdmin)
		const tag = "eg-app"
		resp, _ := call(t, egAppHost, "/orders?tag="+tag, "", []byte(`{"model":"gpt-4o","messages":[]}`), "x-tenant-id", "app-tenant")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		got, ok := r.app.request(tag)
		if !ok {
			t.Fatal("the application never got the request")
		}
		if got.Body != `{"model":"gpt-4o","messages":[]}` {
			t.Errorf("the application got body %q", got.Body)
		}
		if v := resp.Header.Get("x-ratelimit-remaining-requests"); v != "7" {
			t.Errorf("x-ratelimit-remaining-requests: got %q, want the application's own 7", v)
		}
		if after := egTwRequests(t, twAdmin); after != before {
			t.Errorf("tokenwarden saw the application's request: tokenwarden_requests_total %v → %v", before, after)
		}
	})

	t.Run("a 40 MB prompt", func(t *testing.T) {
		content := strings.Repeat("the fox ran far ", 40_000_000/16)
		body := e2eChat(t, content, 100, false)
		start := time.Now()
		resp, b := call(t, egLLMHost, "/v1/chat/completions", c.token, body)
		if resp.StatusCode != http.StatusOK {
			out := envoy.stdout.String()
			t.Fatalf("status %d after %v: %.300s\nenvoy: %.3000s", resp.StatusCode, time.Since(start), b, out[max(0, len(out)-3000):])
		}
		var got struct {
			Usage struct {
				Prompt int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("body: %v\n%.300s", err, b)
		}
		if want := len(body) / 4; got.Usage.Prompt != want {
			t.Errorf("the provider saw %d input tokens, want %d (a %d-byte body, whole)", got.Usage.Prompt, want, len(body))
		}
	})

	t.Run("a client's identity header is not believed", func(t *testing.T) {
		resp, body := call(t, egLLMHost, "/v1/chat/completions", "", chat, "x-tenant-id", c.tenant)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "missing_identity") {
			t.Errorf("no token, a forged x-tenant-id: got %d %s, want tokenwarden's 401 missing_identity", resp.StatusCode, body)
		}
	})
}

// egAwaitEnvoy waits for the Envoy on the translated config to be ready
// with tokenwarden's cluster healthy, and returns its listener's address.
func egAwaitEnvoy(t *testing.T, p *e2eProc, adminFile string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var admin string
	for ; ; time.Sleep(50 * time.Millisecond) {
		if p.exited() {
			t.Fatalf("envoy exited:\n%s", p.stderr.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("envoy on the translated config not ready:\n%s", p.stderr.String())
		}
		if admin == "" {
			b, err := os.ReadFile(adminFile)
			if err != nil || len(bytes.TrimSpace(b)) == 0 {
				continue
			}
			admin = strings.TrimSpace(string(b))
		}
		if code, _, err := e2eGet("http://" + admin + "/ready"); err != nil || code != http.StatusOK {
			continue
		}
		_, clusters, err := e2eGet("http://" + admin + "/clusters")
		if err != nil || !regexp.MustCompile(`envoyextensionpolicy/llm/tokenwarden\S*::127\.0\.0\.1:\d+::health_flags::healthy`).MatchString(clusters) {
			continue
		}
		rr := &e2eRig{admin: admin}
		if addr, err := rr.listenerAddr(slices.Collect(egListenerNames(admin))[0]); err == nil {
			return addr
		}
	}
}

// egListenerNames yields the names of Envoy's listeners.
func egListenerNames(admin string) func(func(string) bool) {
	return func(yield func(string) bool) {
		_, body, err := e2eGet("http://" + admin + "/listeners")
		if err != nil {
			return
		}
		for line := range strings.Lines(body) {
			name, _, _ := strings.Cut(strings.TrimSpace(line), "::")
			if name != "" && !yield(name) {
				return
			}
		}
	}
}

// egTwRequests is the sum of tokenwarden_requests_total.
func egTwRequests(t *testing.T, admin string) float64 {
	t.Helper()
	return (&e2eRig{tw: &twProcess{admin: admin}}).twMetric(t, "tokenwarden_requests_total")
}

// portOfAddr returns the port of host:port.
func portOfAddr(t *testing.T, addr string) int {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	n, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return n
}
