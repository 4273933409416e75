package main

import (
	"flag"
	"fmt"
	"io"
	"time"
)

// options are the soak's command-line settings.
type options struct {
	duration time.Duration // the open-loop traffic
	every    time.Duration // one table row per
	rate     float64       // requests a second; 0: half the measured maximum
	rampStep time.Duration // each concurrency level of the ramp
	maxConc  int           // the ramp's last concurrency level
	tenants  int
	window   time.Duration // the limits' window (and lease): how soon counters expire
	drain    time.Duration // how long to wait for Redis to return to its baseline
	redis    string        // a Redis URL; "" starts redis-server
	envoy    string        // the Envoy binary; "" looks for one
	pprofDir string        // where to save profiles at the end of the traffic
	flatPct  float64       // the flatness tolerance, percent
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 30*time.Minute, "how long to offer the open-loop traffic")
	fs.DurationVar(&o.every, "every", time.Minute, "one table row per `interval`")
	fs.Float64Var(&o.rate, "rate", 0, "requests a second to offer (default: half the maximum the ramp measures; skips the ramp)")
	fs.DurationVar(&o.rampStep, "ramp-step", 5*time.Second, "how long the ramp holds each concurrency level")
	fs.IntVar(&o.maxConc, "ramp-max", 256, "the ramp's highest concurrency level")
	fs.IntVar(&o.tenants, "tenants", 200, "how many tenants send (four of them hot)")
	fs.DurationVar(&o.window, "window", time.Minute, "the limits' window: counters expire about this long after the traffic stops")
	fs.DurationVar(&o.drain, "drain", 0, "how long to wait for Redis to return to its baseline after the traffic (default: 3 windows + 30s)")
	fs.StringVar(&o.redis, "redis", "", "an empty, otherwise idle Redis `URL` (default: start redis-server)")
	fs.StringVar(&o.envoy, "envoy", "", "Envoy binary `file` (default: $ENVOY_BIN, else envoy on PATH)")
	fs.StringVar(&o.pprofDir, "pprof", "", "save tokenwarden's heap and goroutine profiles in `dir` at the end of the traffic")
	fs.Float64Var(&o.flatPct, "flat", 10, "heap and goroutines are flat when the last third's median is within this `percent` (plus a small constant) of the second third's")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	switch {
	case o.duration <= 0 || o.every <= 0 || o.rampStep <= 0:
		return options{}, fmt.Errorf("-duration, -every and -ramp-step must be positive")
	case o.every > o.duration:
		return options{}, fmt.Errorf("-every %v is longer than -duration %v", o.every, o.duration)
	case o.rate < 0:
		return options{}, fmt.Errorf("-rate must not be negative")
	case o.maxConc < 1:
		return options{}, fmt.Errorf("-ramp-max must be positive")
	case o.tenants < hotTenants+1:
		return options{}, fmt.Errorf("-tenants must be at least %d: %d hot ones and one other", hotTenants+1, hotTenants)
	case o.window < 2*time.Second || o.window%time.Second != 0:
		return options{}, fmt.Errorf("-window must be whole seconds, at least 2s")
	case o.flatPct < 0:
		return options{}, fmt.Errorf("-flat must not be negative")
	}
	if o.drain == 0 {
		o.drain = 3*o.window + 30*time.Second
	}
	return o, nil
}
