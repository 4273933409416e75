package localrun

import (
	"os/exec"
	"syscall"
)

// SetDeathSignal makes the kernel kill a child when the command dies
// without stopping it (SIGKILL, a crash), so that none outlives it holding its port.
func SetDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
