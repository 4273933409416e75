//go:build !linux

package localrun

import "os/exec"

// SetDeathSignal does nothing where the kernel cannot tie a child's life to
// its parent's: the command stops its children itself on Ctrl-C.
func SetDeathSignal(*exec.Cmd) {}
