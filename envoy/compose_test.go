package envoy

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// There is no Docker engine where the tests run, so these tests check what can be
// checked without one: the compose file parses, what it mounts and builds
// exists, its Envoy config is the validated one and agrees with the service
// names and ports, and each service's command line is accepted by its binary.

const (
	composeFile = "../docker-compose.yaml"
	dockerfile  = "../Dockerfile"
)

// composeService is the part of the Compose specification the file uses; the
// strict decoding rejects anything else (a typo in a key fails the test).
type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Target     string `yaml:"target"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command   []string `yaml:"command"`
	Volumes   []string `yaml:"volumes"`
	Ports     []string `yaml:"ports"`
	DependsOn []string `yaml:"depends_on"`
}

// composeProject is a docker-compose.yaml.
type composeProject struct {
	Name     string                     `yaml:"name"`
	Services map[string]*composeService `yaml:"services"`
}

// loadCompose decodes docker-compose.yaml strictly.
func loadCompose(t *testing.T) *composeProject {
	t.Helper()
	var p composeProject
	if err := decodeStrict(yamlToMap(t, readFile(t, composeFile)), &p); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	for _, name := range []string{"envoy", "tokenwarden", "redis", "fakellm"} {
		if p.Services[name] == nil {
			t.Fatalf("%s: no service %q", composeFile, name)
		}
	}
	return &p
}

// mounts maps each container path a service mounts to the repository path it
// comes from (relative to this package).
func mounts(t *testing.T, s *composeService) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
			t.Fatalf("volume %q: want ./host/path:/container/path[:ro]", v)
		}
		m[parts[1]] = filepath.Join("..", parts[0])
	}
	return m
}

// hostPaths rewrites the container paths in args to the repository files mounted
// there, so a binary here can be run with a service's command line.
func hostPaths(args []string, mounts map[string]string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if p, ok := mounts[a]; ok {
			out[i], _ = filepath.Abs(p)
		}
	}
	return out
}

// flagValue returns the value of -name in a command line.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("command %q: no %s", args, name)
	}
	return args[i+1]
}

// TestComposeFile checks docker-compose.yaml refers to files that exist, runs the
// validated Envoy config, and that its hosts and ports line up.
func TestComposeFile(t *testing.T) {
	p := loadCompose(t)

	t.Run("referenced files exist", func(t *testing.T) {
		for name, s := range p.Services {
			for _, host := range mounts(t, s) {
				if !fileExists(host) {
					t.Errorf("service %s mounts %s, which does not exist", name, host)
				}
			}
			if s.Build != nil {
				if !fileExists(filepath.Join("..", s.Build.Context)) {
					t.Errorf("service %s: build context %s does not exist", name, s.Build.Context)
				}
				df := string(readFile(t, dockerfile))
				if s.Build.Target != "" && !regexp.MustCompile(`(?m)^FROM .* AS `+regexp.QuoteMeta(s.Build.Target)+`$`).MatchString(df) {
					t.Errorf("service %s: Dockerfile has no stage %q", name, s.Build.Target)
				}
			}
			if s.Image == "" && s.Build == nil {
				t.Errorf("service %s: neither image nor build", name)
			}
		}
	})

	t.Run("envoy runs the validated config", func(t *testing.T) {
		e := p.Services["envoy"]
		host, ok := mounts(t, e)[flagValue(t, e.Command, "-c")]
		if !ok {
			t.Fatalf("envoy -c %s is not a mounted file", flagValue(t, e.Command, "-c"))
		}
		abs, _ := filepath.Abs(host)
		if !slices.ContainsFunc(bootstrapFiles, func(f string) bool { a, _ := filepath.Abs(f); return a == abs }) {
			t.Errorf("envoy runs %s, want one of the validated bootstraps %v", host, bootstrapFiles)
		}
		if !strings.HasPrefix(e.Image, "envoyproxy/envoy:v1.40") {
			t.Errorf("envoy image %q, want envoyproxy/envoy:v1.40… (the version the configs are validated against)", e.Image)
		}
		if !slices.Contains(e.Ports, "10000:10000") {
			t.Errorf("envoy ports %v, want 10000:10000 published", e.Ports)
		}
	})

	t.Run("cluster addresses are the services", func(t *testing.T) {
		b := loadBootstrap(t, "envoy.yaml")
		listens := map[string]string{
			"tokenwarden": path(t, yamlToMap(t, readFile(t, mounts(t, p.Services["tokenwarden"])[flagValue(t, p.Services["tokenwarden"].Command, "-config")])), "listen").(string),
			"fakellm":     flagValue(t, p.Services["fakellm"].Command, "-listen"),
		}
		for _, c := range []string{twCluster, upstreamCluster} {
			sa := cluster(t, b, c).GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			if _, ok := p.Services[sa.GetAddress()]; !ok {
				t.Errorf("cluster %s points at host %q, which is no compose service", c, sa.GetAddress())
				continue
			}
			_, port, _ := net.SplitHostPort(listens[sa.GetAddress()])
			if port != strconv.Itoa(int(sa.GetPortValue())) {
				t.Errorf("cluster %s port %d, but service %s listens on %s", c, sa.GetPortValue(), sa.GetAddress(), listens[sa.GetAddress()])
			}
		}
	})

	t.Run("tokenwarden config uses redis and the stripped headers", func(t *testing.T) {
		tw := p.Services["tokenwarden"]
		cfg := yamlToMap(t, readFile(t, mounts(t, tw)[flagValue(t, tw.Command, "-config")]))
		if got := path(t, cfg, "store", "type"); got != "redis" {
			t.Errorf("store.type: got %v, want redis", got)
		}
		url := path(t, cfg, "store", "redis", "url").(string)
		if !strings.Contains(url, "//redis:") {
			t.Errorf("store.redis.url %q, want the compose service redis", url)
		}
		for _, h := range identityHeadersOf(t, cfg) {
			if !slices.Contains(identityHeaders, h) {
				t.Errorf("tokenwarden reads identity from %s, which envoy.yaml does not strip and set from the JWT", h)
			}
		}
	})
}

// TestComposeEnvoyCommandLine runs Envoy (validate mode) with the compose
// service's own arguments.
func TestComposeEnvoyCommandLine(t *testing.T) {
	e := loadCompose(t).Services["envoy"]
	bin := envoyBinary(t)
	args := append([]string{"--mode", "validate"}, hostPaths(e.Command, mounts(t, e))...)
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("envoy %q: %v\n%s", args, err, out)
	}
}

// TestComposeFakellmCommandLine builds fakellm and starts it with the compose
// service's arguments (plus a loopback -listen, which wins as the later flag),
// then stops it with SIGTERM.
func TestComposeFakellmCommandLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fakellm")
	}
	f := loadCompose(t).Services["fakellm"]
	bin := filepath.Join(t.TempDir(), "fakellm")
	build := exec.Command("go", "build", "-o", bin, "./cmd/fakellm")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fakellm: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(slices.Clone(f.Command), "-listen", "127.0.0.1:0")...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "msg=listening") {
			break
		}
	}
	if !strings.Contains(strings.Join(lines, "\n"), "msg=listening") {
		cmd.Wait()
		t.Fatalf("fakellm %q did not start:\n%s", f.Command, strings.Join(lines, "\n"))
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("fakellm after SIGTERM: %v, want a clean exit", err)
	}
}

// TestComposeTokenwardenCheckConfig runs "tokenwarden check-config" on the config
// the compose service mounts, and checks the service passes -config.
func TestComposeTokenwardenCheckConfig(t *testing.T) {
	tw := loadCompose(t).Services["tokenwarden"]
	file, ok := mounts(t, tw)[flagValue(t, tw.Command, "-config")]
	if !ok {
		t.Fatalf("tokenwarden -config %s is not a mounted file", flagValue(t, tw.Command, "-config"))
	}
	checkConfig(t, file)
}

// TestDockerfile checks the build the compose file relies on: Go 1.26, static
// binaries for both commands, non-root runtime images.
func TestDockerfile(t *testing.T) {
	df := string(readFile(t, dockerfile))
	for _, want := range []string{"FROM golang:1.26 AS build", "CGO_ENABLED=0", "./cmd/tokenwarden", "./cmd/fakellm"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	stages := regexp.MustCompile(`(?m)^FROM (\S+)(?: AS (\S+))?$`).FindAllStringSubmatch(df, -1)
	for _, s := range stages {
		if s[2] == "build" {
			continue
		}
		// Each runtime stage must switch to a non-root user before its entry point.
		rest := df[strings.Index(df, s[0]):]
		if next := strings.Index(rest[len(s[0]):], "\nFROM "); next >= 0 {
			rest = rest[:len(s[0])+next]
		}
		if !regexp.MustCompile(`(?m)^USER (nonroot|[1-9][0-9]*)`).MatchString(rest) {
			t.Errorf("stage %s (%s) runs as root: want a non-root USER", s[2], s[1])
		}
	}
	if last := stages[len(stages)-1][2]; last != "tokenwarden" {
		t.Errorf("default (last) stage is %q, want tokenwarden", last)
	}
	if fileExists("../.dockerignore") {
		for _, line := range strings.Split(string(readFile(t, "../.dockerignore")), "\n") {
			for _, needed := range []string{"go.mod", "go.sum", "cmd"} {
				if strings.TrimSpace(line) == needed {
					t.Errorf(".dockerignore excludes %s, which the build needs", needed)
				}
			}
		}
	}
}
