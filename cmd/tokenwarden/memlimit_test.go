package main

import "testing"

func TestGoMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    string
		cgroup int64
		ok     bool
		want   int64
	}{
		{"a cgroup limit, no GOMEMLIMIT", "", 1000 << 20, true, 900 << 20},
		{"GOMEMLIMIT set: the operator's", "800MiB", 1000 << 20, true, 0},
		{"GOMEMLIMIT off: the operator's", "off", 1000 << 20, true, 0},
		{"no cgroup limit", "", 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := goMemoryLimit(tc.env, tc.cgroup, tc.ok); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}
