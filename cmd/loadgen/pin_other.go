//go:build !linux

package main

import "errors"

// pin is Linux only: elsewhere a CPU list is refused.
type pin struct{ cpus []int }

func parsePin(s string) (pin, error) {
	if s != "" {
		return pin{}, errors.New("CPU pinning is Linux only")
	}
	return pin{}, nil
}

func (p pin) set() bool       { return false }
func (p pin) apply(int) error { return nil }
