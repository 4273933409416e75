package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A pin keeps a process on some CPUs: the load client on one set, the
// servers it measures on another. On a small machine whose load client
// shares the cores with the server, a latency percentile measures the
// scheduler's choices between the two more than the server; pinned
// apart, the server's core runs only the server.
type pin struct {
	cpus []int
}

// parsePin reads a CPU list as taskset writes it: "1", "0,2", "2-3".
// The empty list is no pin.
func parsePin(s string) (pin, error) {
	var p pin
	if s == "" {
		return p, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return p, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return p, fmt.Errorf("bad CPU list %q", s)
			}
		}
		for c := a; c <= b; c++ {
			p.cpus = append(p.cpus, c)
		}
	}
	return p, nil
}

func (p pin) set() bool { return len(p.cpus) > 0 }

// apply pins every thread of process pid (0: this one). A thread
// inherits its creator's mask, so once every existing thread is pinned
// the threads the process makes later are too; the loop runs until a
// pass finds no thread it had not pinned.
func (p pin) apply(pid int) error {
	if !p.set() {
		return nil
	}
	var mask unix.CPUSet
	for _, c := range p.cpus {
		mask.Set(c)
	}
	if pid == 0 {
		pid = os.Getpid()
	}
	done := map[int]bool{}
	for {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		fresh := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &mask); err != nil && err != unix.ESRCH {
				return fmt.Errorf("pinning to CPUs %v: %w", p.cpus, err)
			}
			done[tid] = true
			fresh = true
		}
		if !fresh {
			return nil
		}
	}
}
