package main

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestPackageOf(t *testing.T) {
	for _, tc := range []struct{ name, sym, want string }{
		{"function", "runtime.mallocgc", "runtime"},
		{"method", "github.com/tokenwarden/tokenwarden/internal/llm.(*checker).key", "github.com/tokenwarden/tokenwarden/internal/llm"},
		{"closure", "github.com/tokenwarden/tokenwarden/extproc.(*Server).Process.func1", "github.com/tokenwarden/tokenwarden/extproc"},
		{"generic with a path in its type arguments", "google.golang.org/grpc.(*GenericServerStream[go.shape.*google.golang.org/x.Req]).Recv", "google.golang.org/grpc"},
		{"assembly without a package", "indexbytebody", "indexbytebody"},
		{"outside every function", "?", "?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := packageOf(tc.sym); got != tc.want {
				t.Errorf("packageOf(%q) = %q, want %q", tc.sym, got, tc.want)
			}
		})
	}
}

// fakeSymbols are two functions, at 0x1000 (0x100 bytes) and 0x2000
// (size unknown).
var fakeSymbols = &symbols{syms: []elf.Symbol{
	{Name: "a.f", Value: 0x1000, Size: 0x100},
	{Name: "b.g", Value: 0x2000},
}}

func TestParse(t *testing.T) {
	profile := `version: 1
creator: callgrind-3.19.0
positions: instr line
events: Ir
summary: 0
fl=(1) x.go
fn=(1) a.f
0x1000 10 5
0x10ff 11 7
cfn=(2) b.g
calls=1 0x2000 20
0x1010 12 1000
0x1100 13 3
fn=(2) b.g
0x2000 20 11
0x2fff 21 2
0x800 1 4
totals: 0
`
	got, err := parse(bufio.NewScanner(strings.NewReader(profile)), fakeSymbols)
	if err != nil {
		t.Fatal(err)
	}
	// The call's inclusive 1000 is not a.f's own; 0x1100 is past a.f's
	// size and 0x800 before every function.
	want := costs{"a.f": 12, "b.g": 13, "?": 7}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parse = %v, want %v", got, want)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ name, profile, want string }{
		{"no instruction positions", "positions: line\nevents: Ir\nfn=(1) a.f\n10 5\n", "--dump-instr=yes"},
		{"relative positions", "positions: instr line\nevents: Ir\nfn=(1) a.f\n0x1000 10 5\n+4 * 3\n", "--compress-pos=no"},
		{"a cost line without events", "positions: instr line\nevents: Ir\nfn=(1) a.f\n0x1000 10\n", "without events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(bufio.NewScanner(strings.NewReader(tc.profile)), fakeSymbols)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parse: got error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	base := costs{"same": 10, "gone": 4, "grew": 1}
	prof := costs{"same": 10, "grew": 6, "new": 3}
	got := diff(base, prof, 3)
	want := []row{{"grew", 6, 5}, {"new", 3, 3}, {"same", 10, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diff = %v, want %v", got, want)
	}
	if got := diff(base, prof, 10); len(got) != 4 || got[3] != (row{"gone", 0, -4}) {
		t.Errorf("diff, all rows = %v, want the gone group last at -4", got)
	}
}

// TestABinary builds this command and reads its symbols: the address
// go tool nm gives a function, and an address inside it, name that
// function. (A test binary has no symbol table: go test strips it.)
func TestABinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "cgdiff")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	nm, err := exec.Command("go", "tool", "nm", exe).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	const want = "main.packageOf"
	var pc uint64
	for line := range strings.Lines(string(nm)) {
		if f := strings.Fields(line); len(f) == 3 && f[1] == "T" && f[2] == want {
			if pc, err = strconv.ParseUint(f[0], 16, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	if pc == 0 {
		t.Fatalf("go tool nm does not list %s", want)
	}
	syms, err := readSymbols(exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []uint64{pc, pc + 1} {
		if got := syms.name(addr); got != want {
			t.Errorf("name(%#x) = %q, want %q", addr, got, want)
		}
	}

	// The whole command on two profiles of that binary.
	write := func(name string, ir int) string {
		p := filepath.Join(dir, name)
		body := fmt.Sprintf("positions: instr line\nevents: Ir\nfn=(1) x\n%#x 1 %d\n", pc, ir)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var out strings.Builder
	if err := run([]string{"-bin", exe, "-n", "10", write("base.cg", 1000), write("prof.cg", 3000)}, &out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"instructions per unit: base 0.1k, profile 0.3k (×3.00)",
		"0.3k      0.2k      main.packageOf",
		"0.3k      0.2k      main\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}

func TestStrippedBinaryIsRefused(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "cgdiff")
	if out, err := exec.Command("go", "build", "-ldflags=-s", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if _, err := readSymbols(exe); err == nil || !strings.Contains(err.Error(), "-ldflags=-s") {
		t.Errorf("readSymbols of a stripped binary: got error %v, want one naming -ldflags=-s", err)
	}
}
