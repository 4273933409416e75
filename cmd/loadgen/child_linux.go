package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd's process when loadgen dies
// without stopping it, so that no server it started outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
