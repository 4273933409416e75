// Command cgdiff says where one program spends the instructions another
// does not: it reads two callgrind profiles of Go binaries (a server
// and the do-nothing server it is compared with), attributes each
// profile's instructions to the functions of its binary by address, and
// prints, per unit of work, the functions and packages whose exclusive
// instructions differ most.
//
//	cgdiff -bin PROFILED_BINARY [-base-bin BASE_BINARY] [-n 2000] [-top 30] BASE.cg PROFILE.cg
//
// The profiles must be written with instruction-level positions and
// nothing compressed, so that every cost line names its instruction's
// address:
//
//	valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no ...
//
// Why by address: callgrind's own function names for Go code follow its
// guess at the call stack, which goroutine switches and stack growth
// confuse (whole subtrees land under runtime.mcall); an instruction's
// address always belongs to one function of the binary's symbol table.
// The costs are exclusive: a function's own instructions, not its
// callees'. -n divides every figure by the units of work the profile
// covers (lifecycles, say), so that the output reads per unit.
//
// BENCHMARKS.md uses it on `loadgen serve` profiled under callgrind; the
// do-nothing server is the base.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cgdiff:", err)
		os.Exit(2)
	}
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("cgdiff", flag.ContinueOnError)
	bin := fs.String("bin", "", "the binary PROFILE.cg profiled (required)")
	baseBin := fs.String("base-bin", "", "the binary BASE.cg profiled (default: -bin)")
	n := fs.Float64("n", 1, "units of work each profile covers; figures are per unit")
	top := fs.Int("top", 30, "rows per table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || fs.NArg() != 2 || *n <= 0 {
		return fmt.Errorf("usage: cgdiff -bin BINARY [-base-bin BINARY] [-n UNITS] [-top ROWS] BASE.cg PROFILE.cg")
	}
	if *baseBin == "" {
		*baseBin = *bin
	}
	base, err := load(fs.Arg(0), *baseBin)
	if err != nil {
		return err
	}
	prof, err := load(fs.Arg(1), *bin)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "instructions per unit: base %s, profile %s (×%.2f)\n",
		thousands(base.total() / *n), thousands(prof.total() / *n), prof.total()/base.total())
	for _, t := range []struct {
		title string
		group func(string) string
	}{{"package", packageOf}, {"function", func(s string) string { return s }}} {
		fmt.Fprintf(w, "\n%-9s %-9s %s\n", "profile", "−base", "by "+t.title)
		for _, r := range diff(base.by(t.group), prof.by(t.group), *top) {
			fmt.Fprintf(w, "%-9s %-9s %s\n", thousands(r.profile / *n), thousands(r.delta / *n), r.name)
		}
	}
	return nil
}

// thousands writes an instruction count in thousands, one decimal.
func thousands(v float64) string { return fmt.Sprintf("%.1fk", v/1000) }
