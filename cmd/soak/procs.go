package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tokenwarden/tokenwarden/internal/localrun"
)

// proc is one child process, its output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string        // the file its stderr (and stdout, but Envoy's) goes to
	done chan struct{} // closed when it has exited
	err  error         // its exit status, once done
}

// startProc runs bin with args, its output in dir/name.log. Envoy's
// stdout is its access log, a line per request: it goes to /dev/null,
// written by Envoy as in production, copied by nobody.
func startProc(dir, name, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, cmd: exec.Command(bin, args...), log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child holds its own descriptor
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if name == "envoy" {
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		defer null.Close()
		p.cmd.Stdout = null
	}
	localrun.SetDeathSignal(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid is the process's id, for /proc.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the last lines of the process's log, for an error message.
func (p *proc) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// stopGrace is how long a process gets to exit after SIGTERM before it
// is killed. tokenwarden settles its open streams in that time.
const stopGrace = 20 * time.Second

// stopAll stops the processes, the last started first: SIGTERM, then
// SIGKILL after stopGrace. A process that was already gone, or that
// exits with an error on SIGTERM, is reported.
func stopAll(procs []*proc) error {
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		if p.exited() {
			errs = append(errs, fmt.Errorf("%s had exited before the end: %v\n%s", p.name, p.err, p.tail()))
			continue
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			p.cmd.Process.Kill()
			<-p.done
			errs = append(errs, fmt.Errorf("%s did not stop within %v of SIGTERM", p.name, stopGrace))
			continue
		}
		if p.err != nil && !localrun.StoppedBySignal(p.cmd) {
			errs = append(errs, fmt.Errorf("%s: %w\n%s", p.name, p.err, p.tail()))
		}
	}
	return errors.Join(errs...)
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// readyTimeout bounds how long the processes may take to become ready.
const readyTimeout = 60 * time.Second

// awaitReady waits for each check in turn, failing early when one of
// procs exits.
func awaitReady(ctx context.Context, procs []*proc, checks []localrun.Check) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for _, c := range checks {
		for !c.OK() {
			for _, p := range procs {
				if p.exited() {
					return fmt.Errorf("%s exited while waiting for %s: %v\n%s", p.name, c.What, p.err, p.tail())
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w", c.What, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// admin is an HTTP client for the admin endpoints. It keeps no idle
// connection: one would hold a goroutine in tokenwarden's admin server
// and show up in the goroutine count the soak watches.
var admin = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// rssBytes returns a process's resident set (VmRSS in /proc/PID/status).
func rssBytes(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				n, err := strconv.ParseInt(f[0], 10, 64)
				return n * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// loadAverage returns the 1-, 5- and 15-minute load averages
// (/proc/loadavg).
func loadAverage() ([3]string, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return [3]string{}, err
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return [3]string{}, fmt.Errorf("/proc/loadavg: %q", b)
	}
	return [3]string{f[0], f[1], f[2]}, nil
}
