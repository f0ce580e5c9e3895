package pfbinary

import (
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/internal/testing/syncbuf"
)

// Process is peer-finder (or a program that execs it) running as a real
// process of a test: its output collected while it runs, its status by
// ExitStatus, and nothing of it left behind when the test ends.
type Process struct {
	Name           string    // names it in failures
	Cmd            *exec.Cmd // started; read Cmd.Process, do not Wait
	Stdout, Stderr *syncbuf.Buffer
	done           chan struct{}
	status         int

	mu     sync.Mutex       // guards the two below
	parsed []logtest.Record // Stderr's records up to off, read once
	off    int
}

// Options are how Start runs a process.
type Options struct {
	// Env is the whole environment; nil is the test's own.
	Env []string
	// Grace is how long the cleanup waits after SIGTERM before it kills
	// the process group; 0 kills it at once.
	Grace time.Duration
}

// Start starts prog with args in a process group of its own. At the
// test's cleanup it stops the process (SIGTERM and o.Grace, then SIGKILL
// to the whole group, so a command that outlives peer-finder cannot keep
// the test waiting), fails the test on a data race report in its stderr
// (the binary is built with -race), and logs its output when the test
// failed.
func Start(t testing.TB, name, prog string, args []string, o Options) *Process {
	t.Helper()
	p := &Process{Name: name, Stdout: &syncbuf.Buffer{}, Stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.Cmd = exec.Command(prog, args...)
	p.Cmd.Env = o.Env
	p.Cmd.Stdout, p.Cmd.Stderr = p.Stdout, p.Stderr
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.Cmd.WaitDelay = 5 * time.Second // a child holding the output open
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.Cmd.Wait() // the status is in ProcessState
		p.status = ExitStatus(p.Cmd.ProcessState)
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(o.Grace)
		if strings.Contains(p.Stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("%s: data race:\n%s", name, p.Stderr)
		}
		if t.Failed() {
			t.Logf("%s %q exited %d; stdout:\n%s\nstderr:\n%s", name, args, p.status, p.Stdout, p.Stderr)
		}
	})
	return p
}

// Logs returns the records peer-finder has logged so far (its default text
// format, read back by logtest.ParseText), oldest first. Each line is read
// once, when complete: a wait may call Logs every few milliseconds.
func (p *Process) Logs() []logtest.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.Stderr.String()
	if end := strings.LastIndexByte(s, '\n') + 1; end > p.off {
		p.parsed = append(p.parsed, logtest.ParseText(s[p.off:end])...)
		p.off = end
	}
	return slices.Clone(p.parsed)
}

// Find returns the records logged so far with message msg and the
// attributes kv (logtest.Find).
func (p *Process) Find(msg string, kv ...string) []logtest.Record {
	return logtest.Find(p.Logs(), msg, kv...)
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Status is the exit status (ExitStatus) once Done is closed.
func (p *Process) Status() int {
	<-p.done
	return p.status
}

// Wait waits await.Timeout for the process to exit and returns its status,
// or fails the test.
func (p *Process) Wait(t testing.TB) int {
	t.Helper()
	return p.WaitWithin(t, await.Timeout)
}

// WaitWithin is Wait with its own bound on a hang.
func (p *Process) WaitWithin(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.status
	case <-time.After(timeout):
		t.Fatalf("%s still running after %s", p.Name, timeout)
		return -1
	}
}

// Stop sends SIGTERM and waits; after 15s it kills the process group.
func (p *Process) Stop() { p.stop(15 * time.Second) }

// Kill kills the process group (a crash: nothing released) and waits.
func (p *Process) Kill() { p.stop(0) }

// stop ends the process unless it has: SIGTERM and grace first when grace
// is not 0, then SIGKILL to its group.
func (p *Process) stop(grace time.Duration) {
	if grace > 0 && !p.Exited() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	// The group too when the process has exited: what it started may
	// still run.
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}
