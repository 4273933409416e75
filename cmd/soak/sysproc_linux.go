package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill a child when the soak dies without
// stopping it (SIGKILL, a crash), so that none outlives it holding its port.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
