//go:build unix

package envoy

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readme is the repository's README, whose demo commands TestREADMEDemo runs.
const readme = "../README.md"

// demoPort is the port of Envoy's listener in the README's commands.
const demoPort = "10000"

// TestREADMEDemo runs the local demo exactly as the README tells a new user:
// the README's demo command (with every address moved to a free port, since
// other tests and processes may hold the defaults), then each of the
// README's shell blocks of curl commands to the demo, in order, and checks
// their output against the output the README shows under each command: the
// free tier's burst, and what a client sees (a 429 with a retry time, a
// request too large, a budget held by a stream in flight, a long wait). Then it sends SIGINT to the demo's process
// group, as Ctrl-C in a terminal does, and checks that the demo exits cleanly
// and that Envoy, tokenwarden and fakellm have all stopped listening.
func TestREADMEDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo: Envoy, tokenwarden and fakellm")
	}
	t.Parallel()
	envoyBin := envoyBinary(t)
	for _, tool := range []string{"bash", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			if inCI() {
				t.Fatalf("the README's demo needs %s: %v", tool, err)
			}
			t.Skipf("the README's demo needs %s: %v", tool, err)
		}
	}
	demoCmd, blocks := readmeDemo(t)

	// The README's command, with every address on a free port.
	addrs := map[string]string{}
	for _, f := range []string{"-listen", "-envoy-admin", "-tokenwarden", "-tokenwarden-admin", "-fakellm"} {
		addrs[f] = freeAddr(t)
		demoCmd += " " + f + " " + addrs[f]
	}
	_, listenPort, _ := net.SplitHostPort(addrs["-listen"])

	cmd := exec.Command("bash", "-c", demoCmd)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "ENVOY_BIN="+envoyBin)
	// Its own process group, to be stopped as a terminal's Ctrl-C would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", out.String())
		}
	})

	// The build may take a while on a loaded machine; the demo reports
	// "ready" only once Envoy has seen tokenwarden healthy.
	deadline := time.Now().Add(4 * time.Minute)
	for !strings.Contains(out.String(), "demo: ready.") {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("the demo exited before it was ready: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the demo did not report ready within 4 minutes")
		}
	}

	for i, b := range blocks {
		sh := exec.Command("bash", "-c", strings.ReplaceAll(b.script, "localhost:"+demoPort, "localhost:"+listenPort))
		sh.Dir = ".."
		got, err := sh.Output()
		if err != nil {
			t.Fatalf("the README's curl commands (block %d): %v\n%s", i+1, err, got)
		}
		// The six statuses are the first block's whole first output.
		checkShown(t, string(got), b.shown, i == 0)
		// The 429 after a burst on the free tier's per-minute window is
		// one the SDKs wait out: it must not send them away.
		if i == 0 && strings.Contains(strings.ToLower(string(got)), "x-should-retry: false") {
			t.Errorf("the free tier's per-minute 429 says x-should-retry: false:\n%s", got)
		}
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		// go run itself exits 1 after an interrupt, whatever the program's
		// status: the demo's own last line says whether it stopped cleanly.
		stopped = true
	case <-time.After(40 * time.Second):
		t.Fatal("the demo did not stop within 40s of Ctrl-C")
	}
	if last := lastDemoLine(out.String()); last != "demo: stopped" {
		t.Errorf("the demo's last line after Ctrl-C: got %q, want \"demo: stopped\" (all three exited cleanly)", last)
	}
	for flag, addr := range addrs {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s %s still accepts connections after the demo stopped", flag, addr)
		}
	}
}

// demoBlock is one of the README's shell blocks that send requests to the
// demo: its script, and the output the README shows for it: its runs of
// comment lines, "# " removed, one run per command.
type demoBlock struct {
	script string
	shown  [][]string
}

// readmeDemo returns, from the README: the line that starts the demo, and
// in order the shell blocks that send requests to it (the first is the
// free tier's six requests).
func readmeDemo(t *testing.T) (demoCmd string, blocks []demoBlock) {
	t.Helper()
	for _, block := range fencedBlocks(string(readFile(t, readme))) {
		for line := range strings.Lines(block) {
			if strings.HasPrefix(line, "go run ./cmd/demo") {
				demoCmd = strings.TrimSpace(line)
			}
		}
		if !strings.Contains(block, "localhost:"+demoPort) {
			continue
		}
		b := demoBlock{script: block}
		run := false
		for line := range strings.Lines(block) {
			l, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "# ")
			switch {
			case ok && run:
				b.shown[len(b.shown)-1] = append(b.shown[len(b.shown)-1], l)
			case ok:
				b.shown = append(b.shown, []string{l})
			}
			run = ok
		}
		blocks = append(blocks, b)
	}
	if demoCmd == "" || len(blocks) == 0 || !strings.Contains(blocks[0].script, "for i in 1 2 3 4 5 6") || len(blocks[0].shown) == 0 {
		t.Fatalf("%s: want a code block line starting \"go run ./cmd/demo\", then a block with the six requests to localhost:%s and their output as # comments", readme, demoPort)
	}
	return demoCmd, blocks
}

// fencedBlocks returns the contents of the ``` blocks of a Markdown text.
func fencedBlocks(md string) []string {
	var blocks []string
	var cur *strings.Builder
	for line := range strings.Lines(md) {
		if strings.HasPrefix(line, "```") {
			if cur == nil {
				cur = &strings.Builder{}
			} else {
				blocks = append(blocks, cur.String())
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.WriteString(line)
		}
	}
	return blocks
}

// checkShown checks the output against what the README shows. With
// strict, the first run of shown lines (the six status codes) must be the
// output's first lines, exactly. Every later line must appear after the ones before it: a response
// shown in part, some of its headers left out. A shown line matches an output
// line whole, where "…" stands for any text (a Retry-After, a message the
// README shortens).
func checkShown(t *testing.T, output string, shown [][]string, strict bool) {
	t.Helper()
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(output))
	for sc.Scan() {
		lines = append(lines, strings.TrimRight(sc.Text(), "\r"))
	}
	next := 0
	for i, run := range shown {
		for j, s := range run {
			parts := strings.Split(s, "…")
			for k, p := range parts {
				parts[k] = regexp.QuoteMeta(p)
			}
			re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
			strict := strict && i == 0
			found := false
			for next < len(lines) && !found {
				found = re.MatchString(lines[next])
				next++
				if strict {
					break
				}
			}
			if !found {
				where := "after the lines before it"
				if strict {
					where = fmt.Sprintf("as output line %d", j+1)
				}
				t.Fatalf("the README shows %q, which is not in the output %s:\n%s", s, where, output)
			}
		}
	}
}

// lastDemoLine returns the demo's own last line of output (its children's
// lines carry their names instead).
func lastDemoLine(out string) string {
	last := ""
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "demo:") {
			last = strings.TrimSpace(line)
		}
	}
	return last
}
