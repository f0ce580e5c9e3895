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
	"sync"
	"syscall"
	"time"

	"github.com/flockd/flock/internal/reap"
	"github.com/flockd/flock/peerfinder/sink"
)

// ForwardedSignals are forwarded to the child by default.
var ForwardedSignals = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// ErrExited is returned by Apply when the child has already exited.
var ErrExited = errors.New("child process has exited")

// Config describes the supervised child.
type Config struct {
	// Argv is the command and its arguments; Argv[0] is looked up in PATH.
	Argv []string
	// Env is the child's environment; os.Environ() when nil.
	Env []string
	// Dir is the child's working directory; the current one when empty.
	Dir string
	// ReloadSignal is sent to the child after each later delivery; none when 0.
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

// ParseSignal parses a signal name ("SIGHUP", "HUP", "hup") or number.
func ParseSignal(s string) (syscall.Signal, error) {
	if s == "" {
		return 0, nil
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && fmt.Sprint(n) == s {
		if n <= 0 || n > 64 {
			return 0, fmt.Errorf("signal %q out of range", s)
		}
		return syscall.Signal(n), nil
	}
	name := s
	if len(name) > 3 && (name[:3] == "SIG" || name[:3] == "sig") {
		name = name[3:]
	}
	for sig, nm := range signalNames {
		if equalFold(nm, name) {
			return sig, nil
		}
	}
	return 0, fmt.Errorf("unknown signal %q", s)
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "HUP", syscall.SIGINT: "INT", syscall.SIGQUIT: "QUIT", syscall.SIGKILL: "KILL",
	syscall.SIGUSR1: "USR1", syscall.SIGUSR2: "USR2", syscall.SIGTERM: "TERM", syscall.SIGWINCH: "WINCH",
	syscall.SIGCONT: "CONT", syscall.SIGSTOP: "STOP", syscall.SIGALRM: "ALRM", syscall.SIGPWR: "PWR",
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// Sink supervises one child process. Its first successful Apply starts the
// child; later Applies send the reload signal. It implements sink.Sink.
type Sink struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	cmd     *osexec.Cmd
	started chan struct{} // closed when the child has started
	done    chan struct{} // closed when the child has exited
	code    int           // exit status, valid after done
	cancel  context.CancelFunc
	bg      sync.WaitGroup
	killer  *time.Timer // armed by Stopping
}

var _ sink.Sink = (*Sink)(nil)

// New validates cfg and returns a Sink; nothing is started yet.
func New(cfg Config) (*Sink, error) {
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return nil, errors.New("exec: no command")
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
// calls. It fails with ErrExited once the child has exited, and with the
// start error when the child cannot be started (the engine then retries).
func (s *Sink) Apply(ctx context.Context, d sink.Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		if err := ctx.Err(); err != nil {
			return err
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
	if err := s.cmd.Process.Signal(s.cfg.ReloadSignal); err != nil {
		return fmt.Errorf("exec %s: send reload signal %v: %w", s.cfg.Argv[0], s.cfg.ReloadSignal, err)
	}
	s.log.Info("child reload signalled", "signal", s.cfg.ReloadSignal, "generation", d.Generation)
	return nil
}

// start runs the child and the goroutines that wait for it, forward signals
// and reap orphans. Called with mu held and cmd nil.
func (s *Sink) start(d sink.Delivery) error {
	cmd := osexec.Command(s.cfg.Argv[0], s.cfg.Argv[1:]...)
	cmd.Env, cmd.Dir = s.cfg.Env, s.cfg.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.cfg.Stdin, s.cfg.Stdout, s.cfg.Stderr
	bgCtx, cancel := context.WithCancel(context.Background())
	if s.cfg.Reap {
		if os.Getpid() != 1 {
			// Before the child starts, so none of its orphans escapes us.
			if err := reap.SetSubreaper(); err != nil {
				s.log.Warn("exec: cannot become child subreaper; orphans of the child go to init", "err", err)
			}
		}
		s.bg.Go(func() { _ = reap.Run(bgCtx, reap.Options{Grace: reap.DefaultGrace, Logger: s.log}) })
	}
	var sigs chan os.Signal
	if len(s.cfg.Forward) > 0 {
		// Subscribe before starting so no signal falls between the two.
		sigs = make(chan os.Signal, 8)
		signal.Notify(sigs, s.cfg.Forward...)
	}
	if err := reap.Start(cmd); err != nil {
		if sigs != nil {
			signal.Stop(sigs)
		}
		cancel()
		s.bg.Wait()
		return fmt.Errorf("exec: start %s: %w", s.cfg.Argv[0], err)
	}
	s.cmd, s.cancel = cmd, cancel
	close(s.started)
	s.log.Info("child started", "pid", cmd.Process.Pid, "generation", d.Generation)

	if sigs != nil {
		s.bg.Go(func() {
			defer signal.Stop(sigs)
			for {
				select {
				case <-bgCtx.Done():
					return
				case sig := <-sigs:
					if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
						s.log.Warn("exec: cannot forward signal", "signal", sig, "err", err)
					}
				}
			}
		})
	}
	s.bg.Go(func() {
		err := reap.Wait(cmd)
		code := ExitStatus(cmd.ProcessState, err)
		s.log.Info("child exited", "pid", cmd.Process.Pid, "status", code)
		s.mu.Lock()
		s.code = code
		s.mu.Unlock()
		close(s.done)
	})
	return nil
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

// Started is closed when the child has been started.
func (s *Sink) Started() <-chan struct{} { return s.started }

// Done is closed when the child has exited; ExitCode is then valid.
func (s *Sink) Done() <-chan struct{} { return s.done }

// ExitCode returns the child's exit status (see ExitStatus) once Done is
// closed, and -1 before.
func (s *Sink) ExitCode() int {
	select {
	case <-s.done:
	default:
		return -1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.code
}

// Stop stops the child, if it runs: StopSignal, then SIGKILL after
// KillTimeout (or when ctx is done), and waits for it and for the sink's
// goroutines. It returns the exit status, or -1 when the child never started.
func (s *Sink) Stop(ctx context.Context) int {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return -1
	}
	select {
	case <-s.done:
	default:
		_ = cmd.Process.Signal(s.cfg.StopSignal)
		t := time.NewTimer(s.cfg.KillTimeout)
		select {
		case <-s.done:
		case <-t.C:
			s.log.Warn("exec: child did not stop in time, killing it", "timeout", s.cfg.KillTimeout)
			_ = cmd.Process.Kill()
		case <-ctx.Done():
			_ = cmd.Process.Kill()
		}
		t.Stop()
		<-s.done
	}
	s.Close()
	return s.ExitCode()
}

// Stopping tells the sink that the child was asked to stop from outside (the
// SIGTERM or SIGINT peer-finder received, already forwarded): unless it has
// exited after KillTimeout, it is SIGKILLed, so that peer-finder does not
// outlive the kubelet's grace period. It returns at once; calling it again
// does nothing.
func (s *Sink) Stopping() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.killer != nil {
		return
	}
	cmd := s.cmd
	s.killer = time.AfterFunc(s.cfg.KillTimeout, func() {
		select {
		case <-s.done:
		default:
			s.log.Warn("exec: child did not stop in time, killing it", "timeout", s.cfg.KillTimeout)
			_ = cmd.Process.Kill()
		}
	})
}

// Close stops forwarding signals and reaping; it does not touch the child.
// Call it after Done to release the sink's goroutines.
func (s *Sink) Close() {
	s.mu.Lock()
	cancel, killer := s.cancel, s.killer
	s.mu.Unlock()
	if killer != nil {
		killer.Stop()
	}
	if cancel != nil {
		cancel()
	}
	s.bg.Wait()
}
