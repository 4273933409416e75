package main

import (
	"cmp"
	"debug/elf"
	"fmt"
	"slices"
)

// symbols are a binary's functions by address.
type symbols struct {
	syms []elf.Symbol // functions, by address
}

// readSymbols reads the function symbols of an ELF binary; a stripped
// binary has none, and is refused.
func readSymbols(path string) (*symbols, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	all, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%s: %w (build it without -ldflags=-s)", path, err)
	}
	var s symbols
	for _, sym := range all {
		if elf.ST_TYPE(sym.Info) == elf.STT_FUNC && sym.Value != 0 {
			s.syms = append(s.syms, sym)
		}
	}
	slices.SortFunc(s.syms, func(a, b elf.Symbol) int { return cmp.Compare(a.Value, b.Value) })
	return &s, nil
}

// name returns the function addr belongs to, or "?" outside every
// function (the dynamic loader, vDSO, valgrind's own code).
func (s *symbols) name(addr uint64) string {
	i, found := slices.BinarySearchFunc(s.syms, addr, func(sym elf.Symbol, a uint64) int { return cmp.Compare(sym.Value, a) })
	if !found {
		i--
	}
	if i < 0 {
		return "?"
	}
	sym := s.syms[i]
	if sym.Size > 0 && addr >= sym.Value+sym.Size {
		return "?"
	}
	return sym.Name
}
