package main

import "testing"

func TestCPUList(t *testing.T) {
	for _, tc := range []struct {
		name string
		cpus []int
		want string
	}{
		{"not pinned", nil, "any CPU (not pinned)"},
		{"one", []int{1}, "CPUs [1]"},
		{"a range", []int{2, 3}, "CPUs [2 3]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cpuList(tc.cpus); got != tc.want {
				t.Errorf("cpuList(%v) = %q, want %q", tc.cpus, got, tc.want)
			}
		})
	}
}
