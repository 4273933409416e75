package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/tokenwarden/tokenwarden/internal/localrun"
)

// group is the demo's child processes. Their output goes to one writer, each
// line prefixed with the process's name, as docker compose does.
type group struct {
	stdout io.Writer
	mu     sync.Mutex // serialises writes to stdout
	procs  []*proc
	exited chan *proc // each process once, when it exits
}

// proc is one child process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done
}

// start runs bin with args.
func (g *group) start(name, bin string, args ...string) error {
	p := &proc{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	out := &prefixWriter{g: g, prefix: fmt.Sprintf("%-11s | ", name)}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	localrun.SetDeathSignal(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	g.procs = append(g.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		out.flush()
		close(p.done)
		g.exited <- p
	}()
	return nil
}

// stop ends every process still running: SIGTERM (tokenwarden then settles
// what is in flight), and SIGKILL for any still there after stopGrace. On
// Ctrl-C the terminal has already sent each of them SIGINT; SIGTERM after
// it changes nothing. It returns the exit errors: the three servers exit 0
// when told to stop.
func (g *group) stop(stderr io.Writer) error {
	for _, p := range g.procs {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(stopGrace)
	var errs []error
	for i := len(g.procs) - 1; i >= 0; i-- {
		p := g.procs[i]
		select {
		case <-p.done:
		case <-deadline:
			fmt.Fprintf(stderr, "demo: %s did not stop within %v; killing it\n", p.name, stopGrace)
			p.cmd.Process.Kill()
			<-p.done
		}
		if p.err != nil && !localrun.StoppedBySignal(p.cmd) {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, p.err))
		}
	}
	g.procs = nil
	return errors.Join(errs...)
}

// prefixWriter writes whole lines, each with its prefix.
type prefixWriter struct {
	g      *group
	prefix string
	mu     sync.Mutex
	buf    []byte // an incomplete last line
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i+1])
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// flush writes an incomplete last line, once the process has exited.
func (w *prefixWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(append(w.buf, '\n'))
		w.buf = nil
	}
}

func (w *prefixWriter) emit(line []byte) {
	w.g.mu.Lock()
	defer w.g.mu.Unlock()
	io.WriteString(w.g.stdout, w.prefix)
	w.g.stdout.Write(line)
}
