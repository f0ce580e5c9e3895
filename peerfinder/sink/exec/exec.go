// Package exec implements the exec sink (pid-1 mode, `peer-finder -- CMD
// ARGS...`): it starts the application once the first peer set has been
// delivered, tells it about later changes with a reload signal, forwards the
// signals a container runtime sends, reaps orphaned zombies, and reports the
// application's exit status so peer-finder can exit with it.
//
// Behaviour follows tini's: signals SIGTERM, SIGINT, SIGHUP, SIGQUIT,
// SIGUSR1 and SIGUSR2 received by peer-finder are sent to the child; the
// exit status is the child's, or 128+N when signal N killed it. Orphans are
// reaped by internal/reap, which never takes the exit status of processes
// that other parts of peer-finder (hook scripts) are waiting for. When
// peer-finder is not pid 1 it registers as a child subreaper, so the
// application's orphaned descendants are still reaped.
//
// The child runs in its own process group (in the foreground of the
// terminal on stdin, if any). When it exits, however it ended, what is left
// in that group gets SIGTERM and, after GroupKillGrace, SIGKILL, before Run
// returns: a supervisor's background processes do not outlive it.
package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	osexec "os/exec"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/flockd/flock/internal/reap"
	"github.com/flockd/flock/peerfinder/sink"
)

// GroupKillGrace bounds the time between SIGTERM and SIGKILL for the
// processes left in the child's process group after it exited (less when
// Config.KillTimeout is shorter).
const GroupKillGrace = 2 * time.Second

// ErrExited is returned by Apply when the child has already exited.
var ErrExited = errors.New("child process has exited")

// Config describes the supervised child.
type Config struct {
	// Argv is the command and its arguments; Argv[0] is looked up in PATH.
	Argv []string
	// Env is the child's environment; os.Environ() when nil.
	Env []string
	// EnvFrom, when not nil, gives variables added to Env (replacing ones
	// of the same name) for the delivery that starts the child: computed
	// once, since a running process's environment cannot change. An error
	// fails that Apply, so the start is retried.
	EnvFrom func(sink.Delivery) ([]string, error)
	// Dir is the child's working directory; the current one when empty.
	Dir string
	// ReloadSignal is sent to the child after each later delivery; none when
	// 0. New refuses one that CheckReloadSignal refuses. It is held while the child neither catches nor ignores it and its
	// default action would end or stop the child (see Sink.Apply).
	ReloadSignal syscall.Signal
	// StopSignal is sent by Stop; SIGTERM when 0.
	StopSignal syscall.Signal
	// KillTimeout is how long Stop waits after StopSignal before SIGKILL;
	// 10s when zero.
	KillTimeout time.Duration
	// Forward are the signals forwarded to the child; ForwardedSignals when
	// nil, none when empty and non-nil.
	Forward []os.Signal
	// Reap runs the orphan reaper (internal/reap) while the child runs, as
	// pid 1 or as a child subreaper.
	Reap bool
	// Stdin, Stdout and Stderr default to this process's.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Logger receives records about the child; slog.Default() when nil.
	Logger *slog.Logger
}

// Sink supervises one child process. Its first successful Apply starts the
// child; later Applies send the reload signal. Run supervises the child
// (waits for it, forwards signals, reaps orphans) and returns its exit
// status. It implements sink.Sink and sink.Runner.
type Sink struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	cmd     *osexec.Cmd
	sigs    chan os.Signal // subscribed by the Apply that starts the child; drained by Run
	closed  bool           // Run has returned before the child started: never start it
	started chan struct{}  // closed when the child has started
	done    chan struct{}  // closed when the child has exited
	code    int            // exit status, valid after done
}

var (
	_ sink.Sink   = (*Sink)(nil)
	_ sink.Runner = (*Sink)(nil)
)

// ErrClosed is returned by Apply after Run has returned without a child.
var ErrClosed = errors.New("exec sink stopped")

// ExitError is what Run returns once the child has exited.
type ExitError struct {
	// Status is the child's exit status (see ExitStatus).
	Status int
}

func (e *ExitError) Error() string { return fmt.Sprintf("command exited with status %d", e.Status) }

// ExitStatus is the status peer-finder exits with (see sink.Runner).
func (e *ExitError) ExitStatus() int { return e.Status }

// New validates cfg and returns a Sink; nothing is started yet.
func New(cfg Config) (*Sink, error) {
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return nil, errors.New("exec: no command")
	}
	if err := CheckReloadSignal(cfg.ReloadSignal); err != nil {
		return nil, fmt.Errorf("exec: reload signal: %w", err)
	}
	if cfg.KillTimeout <= 0 {
		cfg.KillTimeout = 10 * time.Second
	}
	if cfg.StopSignal == 0 {
		cfg.StopSignal = syscall.SIGTERM
	}
	if cfg.Forward == nil {
		cfg.Forward = ForwardedSignals
	}
	if cfg.Stdin == nil {
		cfg.Stdin = os.Stdin
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Sink{
		cfg: cfg, log: log.With("sink", "exec", "command", cfg.Argv[0]),
		started: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// Apply starts the child on the first call and sends ReloadSignal on later
// calls. A reload the child has no handler for yet (a server just started,
// whose default action for SIGHUP is to die) is not sent: Apply returns a
// pending result and the engine calls it again with the newest set until
// the child catches or ignores the signal, read from /proc/PID/status; when
// that cannot be read, the signal is sent. Apply fails with ErrExited once
// the child has exited, with the start error when the child cannot be
// started (the engine then retries), and with ErrClosed once Run has
// returned without a child. It starts no goroutine: Run supervises the child.
func (s *Sink) Apply(ctx context.Context, d sink.Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.closed {
			return fmt.Errorf("exec %s: %w", s.cfg.Argv[0], ErrClosed)
		}
		return s.start(d)
	}
	select {
	case <-s.done:
		return fmt.Errorf("exec %s: %w (status %d)", s.cfg.Argv[0], ErrExited, s.code)
	default:
	}
	if s.cfg.ReloadSignal == 0 {
		return nil
	}
	if pid := s.cmd.Process.Pid; !readyFor(pid, s.cfg.ReloadSignal) {
		return sink.Pending(fmt.Errorf("exec %s: pid %d has no handler for %v yet; reload held", s.cfg.Argv[0], pid, s.cfg.ReloadSignal))
	}
	if err := s.cmd.Process.Signal(s.cfg.ReloadSignal); err != nil {
		return fmt.Errorf("exec %s: send reload signal %v: %w", s.cfg.Argv[0], s.cfg.ReloadSignal, err)
	}
	s.log.Info("child reload signalled", "signal", s.cfg.ReloadSignal, "generation", d.Generation)
	return nil
}

// start runs the child. Called with mu held and cmd nil.
func (s *Sink) start(d sink.Delivery) error {
	cmd := osexec.Command(s.cfg.Argv[0], s.cfg.Argv[1:]...)
	cmd.Env, cmd.Dir = s.cfg.Env, s.cfg.Dir
	if s.cfg.EnvFrom != nil {
		extra, err := s.cfg.EnvFrom(d)
		if err != nil {
			return fmt.Errorf("exec %s: environment: %w", s.cfg.Argv[0], err)
		}
		base := cmd.Env
		if base == nil {
			base = os.Environ()
		}
		// os/exec keeps the last of two values of one name.
		cmd.Env = append(slices.Clone(base), extra...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.cfg.Stdin, s.cfg.Stdout, s.cfg.Stderr
	// Its own process group, killed when it exits (see Run); in the
	// foreground of the terminal on stdin, if any, so an interactive
	// command can still read it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if f, ok := s.cfg.Stdin.(*os.File); ok && isTerminal(f) {
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, 0
	}
	if s.cfg.Reap && os.Getpid() != 1 {
		// Before the child starts, so none of its orphans escapes us.
		if err := reap.SetSubreaper(); err != nil {
			s.log.Warn("exec: cannot become child subreaper; orphans of the child go to init", "err", err)
		}
	}
	var sigs chan os.Signal
	if len(s.cfg.Forward) > 0 {
		// Subscribe before starting so no signal falls between the two;
		// Run forwards what arrives.
		sigs = make(chan os.Signal, 8)
		signal.Notify(sigs, s.cfg.Forward...)
	}
	if err := reap.Start(cmd); err != nil {
		if sigs != nil {
			signal.Stop(sigs)
		}
		return fmt.Errorf("exec: start %s: %w", s.cfg.Argv[0], err)
	}
	s.cmd, s.sigs = cmd, sigs
	close(s.started)
	s.log.Info("child started", "pid", cmd.Process.Pid, "generation", d.Generation)
	return nil
}

// Forwards reports whether sig goes to the child: it is one of
// Config.Forward and the child has started and not exited yet.
func (s *Sink) Forwards(sig os.Signal) bool {
	select {
	case <-s.started:
	default:
		return false
	}
	select {
	case <-s.done:
		return false
	default:
	}
	for _, f := range s.cfg.Forward {
		if f == sig {
			return true
		}
	}
	return false
}

// Run implements sink.Runner. It reaps orphans from its start (with Reap),
// waits for the first Apply to start the child (returning nil if ctx ends
// first, after which Apply starts nothing), then supervises it: forwards
// signals and returns an *ExitError with its status when it exits. When ctx
// ends with the cause sink.ErrStopped (another part of peer-finder ended),
// Run sends StopSignal; on any other end of ctx (the SIGTERM or SIGINT
// peer-finder received, already forwarded) it sends nothing. Either way the
// child is SIGKILLed unless it exited within KillTimeout, so peer-finder
// does not outlive the kubelet's grace period. Run leaves no goroutine
// behind.
func (s *Sink) Run(ctx context.Context) error {
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	if s.cfg.Reap {
		// From the start, as pid 1 must: hooks' orphans come to us too.
		wg.Go(func() { _ = reap.Run(bg, reap.Options{Grace: reap.DefaultGrace, Logger: s.log}) })
	}
	select {
	case <-s.started:
	case <-ctx.Done():
		s.mu.Lock()
		s.closed = true
		started := s.cmd != nil // an Apply may have won the race
		s.mu.Unlock()
		if !started {
			return nil
		}
	}
	s.mu.Lock()
	cmd, sigs := s.cmd, s.sigs
	s.mu.Unlock()
	if sigs != nil {
		defer signal.Stop(sigs)
		wg.Go(func() { s.forward(bg, cmd, sigs) })
	}
	wg.Go(func() {
		err := reap.Wait(cmd)
		code := ExitStatus(cmd.ProcessState, err)
		s.log.Info("child exited", "pid", cmd.Process.Pid, "status", code)
		s.mu.Lock()
		s.code = code
		s.mu.Unlock()
		close(s.done)
	})
	// What the child left in its group (background processes, re-parented
	// to us as pid 1 or subreaper) must not outlive it: killed once it has
	// exited, however it ended.
	defer func() {
		<-s.done
		reap.KillGroup(cmd.Process.Pid, s.done, min(s.cfg.KillTimeout, GroupKillGrace))
	}()
	select {
	case <-s.done:
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), sink.ErrStopped) {
			_ = cmd.Process.Signal(s.cfg.StopSignal)
		}
		t := time.NewTimer(s.cfg.KillTimeout)
		select {
		case <-s.done:
		case <-t.C:
			s.log.Warn("exec: child did not stop in time, killing it", "timeout", s.cfg.KillTimeout)
			_ = cmd.Process.Kill()
			<-s.done
		}
		t.Stop()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return &ExitError{Status: s.code}
}

// forward sends the signals that arrive on sigs to the child until ctx ends.
func (s *Sink) forward(ctx context.Context, cmd *osexec.Cmd, sigs <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-sigs:
			if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
				s.log.Warn("exec: cannot forward signal", "signal", sig, "err", err)
			}
		}
	}
}

// ExitStatus is the shell-style status of a finished process: its exit code,
// 128+N when killed by signal N, or 127 when it never ran.
func ExitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		return 127
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
