package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// version is the release, stamped at build time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/tokenwarden
//
// (the Dockerfile does). Unstamped, the build's VCS revision stands in.
var version = ""

// versionString returns what "tokenwarden -version" prints.
func versionString() string {
	v := version
	if v == "" {
		v = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok {
			if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				v = bi.Main.Version
			}
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v += " " + s.Value[:12]
				}
			}
		}
	}
	return fmt.Sprintf("tokenwarden %s (%s %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// usage is the top-level help.
const usage = `tokenwarden puts token-aware limits in front of paid LLM APIs, as an Envoy
external-processing (ext_proc) server.

Usage:
  tokenwarden [-config FILE] [-listen ADDR] [-admin ADDR]   run the server
  tokenwarden check-config [-config FILE]                  validate a config and print what it runs
  tokenwarden estimate [-config FILE] [-path PATH] [FILE|-] print a request body's estimate, part by part
  tokenwarden -version                                     print the version
  tokenwarden help [SUBCOMMAND]                            this help, or a subcommand's

Without -config, the server and check-config use the embedded default config:
memory store, ext_proc gRPC on 127.0.0.1:50051, admin HTTP on 127.0.0.1:9090.

Flags of the server:
`

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// humanWindow renders a window for people: "1 minute", "7 days",
// "90 seconds", rather than Go's "1m0s" and "168h0m0s".
func humanWindow(d time.Duration) string {
	units := []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}}
	for _, u := range units {
		if d >= u.d && d%u.d == 0 {
			n := int64(d / u.d)
			if n == 1 {
				return "1 " + u.name
			}
			return fmt.Sprintf("%d %ss", n, u.name)
		}
	}
	return d.String()
}

// humanMatch renders a limit's match as "tier=free, model=gpt-4o",
// in name order.
func humanMatch(m map[string]string, order []string) string {
	parts := make([]string, 0, len(m))
	for _, k := range order {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}

// printUsage prints the top-level help with the server's flags.
func printUsage(w io.Writer, flags func(io.Writer)) {
	fmt.Fprint(w, usage)
	flags(w)
}
