//go:build !linux

package main

import "os/exec"

// setDeathSignal does nothing where the kernel cannot tie a child's life to
// its parent's: the soak stops its children itself on Ctrl-C.
func setDeathSignal(*exec.Cmd) {}
