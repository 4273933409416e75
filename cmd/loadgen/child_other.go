//go:build !linux

package main

import "os/exec"

// dieWithParent has no portable equivalent outside Linux; loadgen still
// stops the processes it started when it ends normally.
func dieWithParent(*exec.Cmd) {}
