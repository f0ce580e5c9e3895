package exec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	osexec "os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/need"
	"github.com/flockd/flock/internal/testing/syncbuf"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/sink"
	"github.com/prometheus/procfs"
)

// helperEnv makes the test binary act as a supervising peer-finder: it runs
// the exec sink with the command line after "--", reads "apply" lines on
// stdin (each one an Apply, answered by "applied" on stdout) and exits with
// the child's status.
const helperEnv = "FLOCK_EXEC_HELPER"

// generationEnv is the generation of the delivery the helper's child was
// started for.
const generationEnv = "FLOCK_TEST_GENERATION"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	goleak.VerifyTestMain(m)
}

func helperMain(mode string) int {
	if strings.Contains(mode, "mountproc") {
		// pid 1 of a new PID namespace: see its own processes in /proc.
		if err := syscall.Mount("proc", "/proc", "proc", 0, ""); err != nil {
			fmt.Fprintln(os.Stderr, "mount /proc:", err)
			return 90
		}
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	devnull, _ := os.Open(os.DevNull)
	s, err := New(Config{
		Argv: args, ReloadSignal: syscall.SIGHUP, Reap: true, KillTimeout: 2 * time.Second,
		Stdin: devnull, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		// The child learns the delivery it was started for.
		EnvFrom: func(d sink.Delivery) ([]string, error) {
			return []string{fmt.Sprintf("%s=%d", generationEnv, d.Generation)}, nil
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 91
	}
	if strings.Contains(mode, "hooks") {
		// Hook scripts run concurrently with the reaper (as the hook sink
		// does); each must keep its exit status.
		go func() {
			for i := range 60 {
				code := i % 4
				err := osexec.Command("sh", "-c", fmt.Sprintf("(sleep 0.01 &); exit %d", code)).Run()
				var ee *osexec.ExitError
				got := 0
				if errors.As(err, &ee) {
					got = ee.ExitCode()
				} else if err != nil {
					got = -1
				}
				if got != code {
					fmt.Fprintf(os.Stderr, "hook-lost-status run=%d got=%d want=%d err=%v\n", i, got, code, err)
				}
			}
		}()
	}
	set := peer.NewSet(peer.Peer{FQDN: "a.svc", IPs: []string{"10.0.0.1"}})
	firstAnswered := make(chan struct{}) // the first Apply's answer is written
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		gen := uint64(0)
		for sc.Scan() {
			gen++
			err := s.Apply(context.Background(), sink.Delivery{Set: set, Self: "a.svc", Generation: gen, First: gen == 1})
			if err != nil {
				fmt.Printf("apply-error %v\n", err)
			} else {
				fmt.Println("applied")
			}
			if gen == 1 {
				close(firstAnswered)
			}
		}
	}()
	var ee *ExitError
	if err := s.Run(context.Background()); !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, "run:", err)
		return 92
	}
	// A child that exits at once must not end the helper before it answered
	// the Apply that started it.
	select {
	case <-firstAnswered:
	case <-time.After(5 * time.Second):
	}
	return ee.Status
}

// supervisor is a running helper process.
type supervisor struct {
	t     *testing.T
	cmd   *osexec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	errb  *syncbuf.Buffer // written by os/exec while the test reads it
	ended chan struct{}
	// stdout is the read end of the child's stdout, for deadlines.
	stdout *os.File
}

func startSupervisor(t *testing.T, mode string, attr *syscall.SysProcAttr, argv ...string) *supervisor {
	t.Helper()
	cmd := osexec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, argv...)...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.SysProcAttr = attr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errb := &syncbuf.Buffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &supervisor{t: t, cmd: cmd, in: in, out: bufio.NewReader(out), errb: errb, ended: make(chan struct{}), stdout: out.(*os.File)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = s.wait()
	})
	return s
}

func (s *supervisor) apply() {
	s.t.Helper()
	if _, err := io.WriteString(s.in, "apply\n"); err != nil {
		s.t.Fatal(err)
	}
	// A deadline on the pipe: a supervisor that never answers fails the
	// test instead of hanging it.
	_ = s.stdout.SetReadDeadline(time.Now().Add(await.Timeout))
	line, err := s.out.ReadString('\n')
	if err != nil || line != "applied\n" {
		s.t.Fatalf("apply: %q, %v; stderr:\n%s", line, err, s.errb)
	}
}

// wait returns the supervisor's exit status.
func (s *supervisor) wait() int {
	select {
	case <-s.ended:
		return s.cmd.ProcessState.ExitCode()
	default:
	}
	_ = s.in.Close()
	_ = s.stdout.SetReadDeadline(time.Time{})
	exited := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, s.out)
		_ = s.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(await.Timeout):
		s.t.Errorf("supervisor still running %s after its stdin closed; killing it", await.Timeout)
		_ = s.cmd.Process.Kill()
		<-exited
	}
	close(s.ended)
	return s.cmd.ProcessState.ExitCode()
}

func waitForFile(t *testing.T, path string, d time.Duration) string {
	t.Helper()
	var b []byte
	await.Poll{Timeout: d, Every: 10 * time.Millisecond}.Check(t, func() (err error) {
		if b, err = os.ReadFile(path); err == nil && len(b) == 0 {
			err = errors.New("empty")
		}
		return err
	}, "%s to be written", path)
	return string(b)
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		want   int
	}{
		{"success", "exit 0", 0},
		{"failure", "exit 42", 42},
		{"killed by SIGKILL", "kill -KILL $$", 128 + 9},
		{"killed by SIGTERM", "kill -TERM $$", 128 + 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSupervisor(t, "plain", nil, "sh", "-c", tc.script)
			s.apply()
			if got := s.wait(); got != tc.want {
				t.Errorf("status = %d, want %d; stderr:\n%s", got, tc.want, s.errb)
			}
		})
	}
}

// TestNothingStartsBeforeFirstApply: the child starts for the first
// delivery; one started before it (when Run starts) would have none.
func TestNothingStartsBeforeFirstApply(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	s := startSupervisor(t, "plain", nil, "sh", "-c", "echo generation=$"+generationEnv+" > "+marker)
	s.apply()
	if got := strings.TrimSpace(waitForFile(t, marker, 5*time.Second)); got != "generation=1" {
		t.Fatalf("the child ran with %q, want generation=1: it did not start for the first delivery", got)
	}
	if got := s.wait(); got != 0 {
		t.Errorf("status = %d", got)
	}
}

func TestSignalForwarding(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2} {
		name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			got, ready := filepath.Join(dir, "got"), filepath.Join(dir, "ready")
			script := fmt.Sprintf(`trap 'echo %[1]s > %[2]s; exit %[3]d' %[1]s; echo ok > %[4]s; while :; do sleep 0.02; done`,
				name, got, 10+int(sig), ready)
			s := startSupervisor(t, "plain", nil, "sh", "-c", script)
			s.apply()
			waitForFile(t, ready, 5*time.Second)
			if err := s.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if b := waitForFile(t, got, 5*time.Second); strings.TrimSpace(b) != name {
				t.Errorf("child trapped %q, want %s", b, name)
			}
			if code := s.wait(); code != 10+int(sig) {
				t.Errorf("status = %d, want %d; stderr:\n%s", code, 10+int(sig), s.errb)
			}
		})
	}
}

func TestReloadSignal(t *testing.T) {
	dir := t.TempDir()
	reloads, ready := filepath.Join(dir, "reloads"), filepath.Join(dir, "ready")
	script := fmt.Sprintf(`trap 'echo hup >> %s' HUP; trap 'exit 0' TERM; echo ok > %s; while :; do sleep 0.02; done`, reloads, ready)
	s := startSupervisor(t, "plain", nil, "sh", "-c", script)
	s.apply() // starts
	waitForFile(t, ready, 5*time.Second)
	for range 3 {
		s.apply() // reload
		time.Sleep(100 * time.Millisecond)
	}
	await.Check(t, func() error {
		b, _ := os.ReadFile(reloads)
		if n := strings.Count(string(b), "hup"); n != 3 {
			return fmt.Errorf("child saw %d reloads", n)
		}
		return nil
	}, "the child to see 3 reloads")
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if code := s.wait(); code != 0 {
		t.Errorf("status = %d", code)
	}
}

// A change that comes before the child handles the reload signal is held
// (a pending result), not sent: SIGHUP's default action would kill a server
// that has not installed its handler yet (CI saw pid1.yaml's stand-in die
// with status 129, 35 ms after its start). Once the child handles the
// signal, the next Apply sends it.
func TestReloadHeldUntilChildHandlesIt(t *testing.T) {
	dir := t.TempDir()
	gate, trapped, reloads := filepath.Join(dir, "gate"), filepath.Join(dir, "trapped"), filepath.Join(dir, "reloads")
	script := fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.01; done; trap 'echo hup >> %s' HUP; trap 'exit 0' TERM; echo ok > %s; while :; do sleep 0.02 & wait $!; done`,
		gate, reloads, trapped)
	// Under nohup this process ignores SIGHUP and a child inherits that: it
	// would handle the signal from its start. A caught signal is reset to
	// its default action by exec, so catch it while the child starts.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	s, err := New(Config{Argv: []string{"sh", "-c", script}, ReloadSignal: syscall.SIGHUP, Forward: []os.Signal{}, KillTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stop, result := runSink(t, s)
	if err := s.Apply(context.Background(), sink.Delivery{Generation: 1, First: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(context.Background(), sink.Delivery{Generation: 2}); !sink.IsPending(err) {
		t.Fatalf("Apply before the child handles SIGHUP = %v, want a pending result", err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, trapped, 5*time.Second)
	gen := uint64(2)
	await.Until(t, func() bool {
		gen++
		err := s.Apply(context.Background(), sink.Delivery{Generation: gen})
		if err != nil && !sink.IsPending(err) {
			t.Fatalf("Apply after the child installed its handler = %v", err)
		}
		return err == nil
	}, "the held reload to be sent")
	if got := waitForFile(t, reloads, 5*time.Second); got != "hup\n" {
		t.Errorf("child saw %q, want one reload", got)
	}
	stop(sink.ErrStopped)
	if got := exitStatus(t, await.Recv(t, result, "Run to return")); got != 0 {
		t.Errorf("status %d, want 0: the child was killed, not stopped", got)
	}
}

func TestHandles(t *testing.T) {
	// SigCgt 0x10a01: HUP (bit 0), USR1 (9), USR2 (11), CHLD (16) caught;
	// SigIgn 0x4: QUIT (2) ignored.
	status := []byte("Name:\tsh\nSigQ:\t0/94661\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000004\nSigCgt:\t0000000000010a01\n")
	for sig, want := range map[syscall.Signal]bool{
		syscall.SIGHUP: true, syscall.SIGQUIT: true, syscall.SIGUSR1: true, syscall.SIGUSR2: true,
		syscall.SIGTERM: false, syscall.SIGINT: false, syscall.Signal(64): false,
	} {
		if got, err := handles(status, sig); err != nil || got != want {
			t.Errorf("handles(%v) = %v, %v; want %v", sig, got, err, want)
		}
	}
	for _, bad := range []string{"", "SigCgt:\t0000000000000001\n", "SigIgn:\t0\nSigCgt:\tzz\n"} {
		if _, err := handles([]byte(bad), syscall.SIGHUP); err == nil {
			t.Errorf("handles(%q) gave no error", bad)
		}
	}
	// Sent without looking: a signal whose default is to do nothing, and any
	// signal to a pid whose status cannot be read.
	if !readyFor(os.Getpid(), syscall.SIGWINCH) || !readyFor(1<<30, syscall.SIGHUP) {
		t.Error("readyFor holds a signal that is harmless by default, or one for a pid without a status")
	}
}

// childrenOf lists the processes whose parent is pid, with their state and
// command name, from the host's /proc.
func childrenOf(pid int) (states map[int]string) {
	states = map[int]string{}
	procs, _ := procfs.AllProcs()
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PPID == pid {
			states[p.PID] = st.State + " " + st.Comm
		}
	}
	return states
}

func TestOrphansReaped(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode string
		attr func() *syscall.SysProcAttr
	}{
		{"subreaper", "plain hooks", func() *syscall.SysProcAttr { return nil }},
		{"pid1-in-pid-namespace", "mountproc hooks", func() *syscall.SysProcAttr {
			return &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Unshareflags: syscall.CLONE_NEWNS}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.attr() != nil {
				need.Root(t, "for a PID namespace")
			}
			dir := t.TempDir()
			ready := filepath.Join(dir, "ready")
			// The orphans run sleep under their own name, so the helper's
			// hooks' orphans (sleep 0.01, each a zombie for the reaper's
			// grace) are not taken for them on a busy machine.
			nap := filepath.Join(dir, "orphan-nap")
			sleepPath, err := osexec.LookPath("sleep")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(sleepPath, nap); err != nil {
				t.Fatal(err)
			}
			// The child leaves three grandchildren behind (their parents, the
			// subshells, exit at once), then stays up a while.
			script := fmt.Sprintf(`for i in 1 2 3; do (%s 1 &); done; echo ok > %s; sleep 6; exit 4`, nap, ready)
			s := startSupervisor(t, tc.mode, tc.attr(), "sh", "-c", script)
			s.apply()
			waitForFile(t, ready, 5*time.Second)
			// The orphans were adopted by the supervisor (the subshells
			// exit at once, but not before ready on a loaded machine)...
			sleeps := func() (n int) {
				for _, st := range childrenOf(s.cmd.Process.Pid) {
					if strings.HasSuffix(st, " orphan-nap") {
						n++
					}
				}
				return n
			}
			// Within the second the orphans nap.
			await.Poll{Timeout: time.Second, Every: 10 * time.Millisecond}.Check(t, func() error {
				if adopted := sleeps(); adopted < 3 {
					if strings.Contains(s.errb.String(), "mount /proc") {
						t.Skipf("cannot run as pid 1 with its own /proc: %s", s.errb)
					}
					return fmt.Errorf("%d adopted: %v", adopted, childrenOf(s.cmd.Process.Pid))
				}
				return nil
			}, "3 orphaned sleeps adopted by the supervisor")
			// ...and after they exited, none is left a zombie: a zombie
			// seen for a moment is one not reaped yet, so look until the
			// child's own end (6 s) draws near.
			await.Poll{Timeout: 4 * time.Second, Every: 20 * time.Millisecond}.Check(t, func() error {
				var zombies []string
				for pid, st := range childrenOf(s.cmd.Process.Pid) {
					if strings.HasSuffix(st, " orphan-nap") {
						zombies = append(zombies, fmt.Sprintf("%d (%s)", pid, st))
					}
				}
				if len(zombies) > 0 {
					return fmt.Errorf("zombies or still running: %v", zombies)
				}
				return nil
			}, "no orphan left under the supervisor")
			if code := s.wait(); code != 4 {
				t.Errorf("status = %d, want 4; stderr:\n%s", code, s.errb)
			}
			if strings.Contains(s.errb.String(), "hook-lost-status") {
				t.Errorf("hooks lost their exit status while reaping:\n%s", s.errb)
			}
		})
	}
}

// runSink runs s.Run until the test ends or stop is called; the result
// arrives on the returned channel.
func runSink(t *testing.T, s *Sink) (stop context.CancelCauseFunc, result <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() { done <- s.Run(ctx); close(finished) }()
	t.Cleanup(func() {
		cancel(sink.ErrStopped)
		select {
		case <-finished:
		case <-time.After(await.Timeout):
			t.Error("Run did not return after cancel")
		}
	})
	return cancel, done
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Run = %v, want an *ExitError", err)
	}
	return ee.Status
}

func TestSinkInProcess(t *testing.T) {
	// Stopped by another part (cause sink.ErrStopped): StopSignal, then
	// SIGKILL after KillTimeout; Apply after exit fails.
	ready := filepath.Join(t.TempDir(), "ready")
	s, err := New(Config{Argv: []string{"sh", "-c", "trap '' TERM; echo ok > " + ready + "; while :; do sleep 0.02; done"}, KillTimeout: 200 * time.Millisecond, Forward: []os.Signal{}})
	if err != nil {
		t.Fatal(err)
	}
	stop, result := runSink(t, s)
	if err := s.Apply(context.Background(), sink.Delivery{Generation: 1, First: true}); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, ready, 5*time.Second) // the shell installed its trap
	start := time.Now()
	stop(sink.ErrStopped)
	if got := exitStatus(t, await.Recv(t, result, "Run to return")); got != 128+9 {
		t.Errorf("status %d, want 137", got)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("SIGKILL after %v, before the kill timeout", d)
	}
	if err := s.Apply(context.Background(), sink.Delivery{Generation: 2}); !errors.Is(err, ErrExited) {
		t.Errorf("Apply after exit = %v, want ErrExited", err)
	}

	// A command that cannot start is an Apply error; Run ends without one.
	bad, _ := New(Config{Argv: []string{filepath.Join(t.TempDir(), "missing")}})
	if err := bad.Apply(context.Background(), sink.Delivery{Generation: 1}); err == nil {
		t.Error("Apply of a missing command succeeded")
	}
	stopBad, badResult := runSink(t, bad)
	stopBad(sink.ErrStopped)
	if err := await.Recv(t, badResult, "Run of a never-started sink to return"); err != nil {
		t.Errorf("Run of a never-started sink = %v, want nil", err)
	}
	if err := bad.Apply(context.Background(), sink.Delivery{Generation: 2}); !errors.Is(err, ErrClosed) {
		t.Errorf("Apply after Run returned = %v, want ErrClosed", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without a command succeeded")
	}
}

// Run sends StopSignal only when another part stopped peer-finder; a
// cancellation from outside (the SIGTERM peer-finder received, which Run
// forwards itself) sends nothing more, and the child is killed only after
// KillTimeout.
func TestRunStopSignalOnlyWhenStopped(t *testing.T) {
	for _, tt := range []struct {
		cause error
		want  int
	}{{sink.ErrStopped, 7}, {errors.New("SIGTERM received"), 128 + 9}} {
		ready := filepath.Join(t.TempDir(), "ready")
		s, err := New(Config{Argv: []string{"sh", "-c", "trap 'exit 7' TERM; echo ok > " + ready + "; while :; do sleep 0.02; done"}, KillTimeout: 300 * time.Millisecond, Forward: []os.Signal{}})
		if err != nil {
			t.Fatal(err)
		}
		stop, result := runSink(t, s)
		if err := s.Apply(context.Background(), sink.Delivery{Generation: 1, First: true}); err != nil {
			t.Fatal(err)
		}
		waitForFile(t, ready, 5*time.Second) // the shell installed its trap
		stop(tt.cause)
		if got := exitStatus(t, await.Recv(t, result, "Run to return")); got != tt.want {
			t.Errorf("cancelled with %v: status %d, want %d", tt.cause, got, tt.want)
		}
	}
}

// Apply starts the child and no goroutine: Run supervises it (before, Apply
// left a waiter, a signal forwarder and a reaper running on
// context.Background after it returned).
func TestApplyStartsNoGoroutine(t *testing.T) {
	s, err := New(Config{Argv: []string{"sleep", "30"}, Forward: []os.Signal{}})
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	if err := s.Apply(context.Background(), sink.Delivery{Generation: 1, First: true}); err != nil {
		t.Fatal(err)
	}
	leaked := goleak.Find(before)
	runSink(t, s) // reaps the child at cleanup
	if leaked != nil {
		t.Errorf("Apply left goroutines running after it returned: %v", leaked)
	}
}

func TestParseSignal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want syscall.Signal
		err  bool
	}{
		{"", 0, false}, {"SIGHUP", syscall.SIGHUP, false}, {"hup", syscall.SIGHUP, false},
		{"USR2", syscall.SIGUSR2, false}, {"1", syscall.SIGHUP, false}, {"15", syscall.SIGTERM, false},
		{"SIGNOPE", 0, true}, {"0", 0, true}, {"99", 0, true}, {"65", 0, true}, {"-1", 0, true},
		{"SIGTSTP", syscall.SIGTSTP, false}, {"ttin", syscall.SIGTTIN, false}, {"TTOU", syscall.SIGTTOU, false},
	} {
		got, err := ParseSignal(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v, err %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestCheckReloadSignal: a reload signal must be one the application can
// catch and whose default action does not stop it (issue 36 #13: with
// SIGSTOP the application was frozen after the first change).
func TestCheckReloadSignal(t *testing.T) {
	for _, in := range []string{"SIGHUP", "USR1", "usr2", "WINCH", "10", "34", "64"} {
		sig, err := ParseSignal(in)
		if err != nil {
			t.Fatalf("ParseSignal(%q): %v", in, err)
		}
		if err := CheckReloadSignal(sig); err != nil {
			t.Errorf("CheckReloadSignal(%s) = %v, want nil", in, err)
		}
	}
	for _, in := range []string{"SIGKILL", "9", "SIGSTOP", "stop", "19", "TSTP", "20", "TTIN", "21", "TTOU", "22", "32", "33"} {
		sig, err := ParseSignal(in)
		if err != nil {
			t.Fatalf("ParseSignal(%q): %v", in, err)
		}
		if err := CheckReloadSignal(sig); err == nil {
			t.Errorf("CheckReloadSignal(%s) = nil, want an error", in)
		}
		if _, err := New(Config{Argv: []string{"true"}, ReloadSignal: sig}); err == nil {
			t.Errorf("New with ReloadSignal %s succeeded", in)
		}
	}
}

// TestEnvFromAtStart: EnvFrom's variables reach the command, over
// inherited ones of the same name, computed once from the delivery that
// starts it; an EnvFrom error fails that Apply and starts nothing.
func TestEnvFromAtStart(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	var calls []uint64
	envFrom := func(d sink.Delivery) ([]string, error) {
		calls = append(calls, d.Generation)
		if d.Generation == 1 {
			return nil, errors.New("no rank yet")
		}
		return []string{"RANK=" + strconv.FormatUint(d.Generation, 10), "HOME=/rendezvous"}, nil
	}
	s, err := New(Config{Argv: []string{"sh", "-c", `echo "$RANK $HOME $KEPT" > ` + out + `; while :; do sleep 0.02; done`},
		Env: []string{"HOME=/root", "KEPT=yes"}, EnvFrom: envFrom, ReloadSignal: syscall.SIGCONT, Forward: []os.Signal{}})
	if err != nil {
		t.Fatal(err)
	}
	runSink(t, s)
	if err := s.Apply(context.Background(), sink.Delivery{Generation: 1, First: true}); err == nil || !strings.Contains(err.Error(), "no rank yet") {
		t.Fatalf("Apply with a failing EnvFrom = %v", err)
	}
	for g := uint64(2); g <= 3; g++ {
		if err := s.Apply(context.Background(), sink.Delivery{Generation: g, First: g == 2}); err != nil {
			t.Fatal(err)
		}
	}
	if got := waitForFile(t, out, 5*time.Second); got != "2 /rendezvous yes\n" {
		t.Errorf("the command saw %q, want %q", got, "2 /rendezvous yes\n")
	}
	if !slices.Equal(calls, []uint64{1, 2}) {
		t.Errorf("EnvFrom called for generations %v, want [1 2] (once per start attempt)", calls)
	}
}
