package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

func TestParsePin(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []int
		bad  bool
	}{
		{name: "none", in: ""},
		{name: "one", in: "1", want: []int{1}},
		{name: "list", in: "0,2", want: []int{0, 2}},
		{name: "range", in: "2-4", want: []int{2, 3, 4}},
		{name: "both", in: "0,2-3", want: []int{0, 2, 3}},
		{name: "word", in: "one", bad: true},
		{name: "negative", in: "-1", bad: true},
		{name: "backwards range", in: "3-1", bad: true},
		{name: "empty item", in: "1,", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parsePin(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("parsePin(%q) = %v, want an error", tt.in, p.cpus)
				}
				return
			}
			if err != nil || !slices.Equal(p.cpus, tt.want) {
				t.Fatalf("parsePin(%q) = %v, %v; want %v", tt.in, p.cpus, err, tt.want)
			}
		})
	}
}

// TestPinApply pins a running process and reads the kernel's view of
// its mask back.
func TestPinApply(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	p := pin{cpus: []int{0}}
	if err := p.apply(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Cpus_allowed_list:\s*(\S+)`).FindSubmatch(status)
	if m == nil || string(m[1]) != "0" {
		t.Fatalf("Cpus_allowed_list after pinning to CPU 0: got %q, want \"0\"", m)
	}
}
