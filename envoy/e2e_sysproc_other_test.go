//go:build !linux

package envoy

import "os/exec"

// setE2EDeathSignal has no portable equivalent outside Linux; TestMain still
// kills the processes when the tests end normally.
func setE2EDeathSignal(*exec.Cmd) {}
