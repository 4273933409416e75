package redistest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the server if the test binary dies
// without cleaning up (a panic, a timeout), so that no server outlives it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
