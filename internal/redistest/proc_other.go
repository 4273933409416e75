//go:build !linux

package redistest

import "os/exec"

// setDeathSignal has no portable equivalent outside Linux; Stop still
// kills the server when the test ends normally.
func setDeathSignal(*exec.Cmd) {}
