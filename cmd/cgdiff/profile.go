package main

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// costs are a profile's exclusive instructions by function.
type costs map[string]float64

func (c costs) total() float64 {
	var t float64
	for _, v := range c {
		t += v
	}
	return t
}

// by sums the costs by group(function).
func (c costs) by(group func(string) string) costs {
	out := costs{}
	for k, v := range c {
		out[group(k)] += v
	}
	return out
}

// load reads the callgrind profile at path and attributes its costs to
// the functions of binary.
func load(path, binary string) (costs, error) {
	syms, err := readSymbols(binary)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parse(bufio.NewScanner(f), syms)
}

// parse reads a callgrind profile written with --dump-instr=yes and
// --compress-pos=no: a cost line is an absolute address, then the other
// positions (a line number), then the events, Ir first. The line after a
// calls= line is the call's inclusive cost, which belongs to the callee
// and is counted there as its own lines; it is skipped.
func parse(sc *bufio.Scanner, syms *symbols) (costs, error) {
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	out := costs{}
	positions, skip, lines := 0, false, 0
	for sc.Scan() {
		line := sc.Text()
		lines++
		switch {
		case strings.HasPrefix(line, "positions:"):
			positions = len(strings.Fields(line)) - 1
			if !strings.Contains(line, "instr") {
				return nil, fmt.Errorf("line %d: the profile has no instruction positions (run callgrind with --dump-instr=yes)", lines)
			}
		case strings.HasPrefix(line, "calls="):
			skip = true
		case strings.HasPrefix(line, "0x"):
			if skip {
				skip = false
				continue
			}
			f := strings.Fields(line)
			if positions == 0 || len(f) <= positions {
				return nil, fmt.Errorf("line %d: a cost line without events: %q", lines, line)
			}
			addr, err := strconv.ParseUint(f[0][2:], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", lines, err)
			}
			ir, err := strconv.ParseFloat(f[positions], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", lines, err)
			}
			out[syms.name(addr)] += ir
		case len(line) > 0 && (line[0] == '+' || line[0] == '-' || line[0] == '*'):
			return nil, fmt.Errorf("line %d: relative positions (run callgrind with --compress-pos=no)", lines)
		}
	}
	return out, sc.Err()
}

// packageOf returns the package of a Go symbol: the path up to its last
// slash, then up to the first dot after it. A generic function's type
// arguments, which hold paths of their own, are not looked at. A symbol
// without a package (assembly such as indexbytebody) is its own group.
func packageOf(sym string) string {
	head := sym
	if i := strings.IndexByte(head, '['); i >= 0 {
		head = head[:i]
	}
	slash := strings.LastIndexByte(head, '/') + 1
	if i := strings.IndexByte(sym[slash:], '.'); i >= 0 {
		return sym[:slash+i]
	}
	return sym
}

// A row is a group's cost in the profile and what it adds to the base's.
type row struct {
	name           string
	profile, delta float64
}

// diff returns the top groups by what the profile adds to the base,
// largest first.
func diff(base, prof costs, top int) []row {
	var rows []row
	for k, v := range prof {
		rows = append(rows, row{k, v, v - base[k]})
	}
	for k, v := range base {
		if _, ok := prof[k]; !ok {
			rows = append(rows, row{k, 0, -v})
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if c := cmp.Compare(b.delta, a.delta); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return rows[:min(top, len(rows))]
}
