package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTime returns a process's user+system CPU time, all its threads, from
// /proc (Linux). The kernel counts it in clock ticks of 10 ms, so a
// measurement needs a few seconds of load to be precise to a percent.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of pid %d (Linux only): %w", pid, err)
	}
	// Fields after the command name (which may hold spaces) start after ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 > len(b) {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}
