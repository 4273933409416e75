package envoy

import (
	"os/exec"
	"syscall"
)

// setE2EDeathSignal makes the kernel kill an end-to-end child process (Envoy,
// tokenwarden, fakellm) when the test binary dies without cleaning up (a
// panic, a -timeout), so that none outlives it holding its ports.
func setE2EDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
