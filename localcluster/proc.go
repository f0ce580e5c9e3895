package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// startProc starts a component detached from the caller: its own session (so
// a terminal's Ctrl-C or the end of "go test" does not reach it), stdin from
// /dev/null, output to logs/<name>.log; the log of a previous cluster is
// kept as .prev.
func startProc(stateDir, name, bin string, args []string) (Proc, error) {
	logPath := filepath.Join(stateDir, "logs", name+".log")
	if _, err := os.Stat(logPath); err == nil {
		_ = os.Rename(logPath, logPath+".prev") // keep one previous run for post-mortems
	}
	return startLogged(stateDir, name, bin, args, logPath, "")
}

// maxKeptLog is the size past which a restarted component's log is
// rotated after all: a campaign restarts the API server every few minutes
// and nodes at random for hours.
const maxKeptLog = 256 << 20

// startLogged starts the component with its output appended to logPath,
// after header.
func startLogged(stateDir, name, bin string, args []string, logPath, header string) (Proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Proc{}, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer logf.Close() // the child keeps its own descriptor
	_, _ = logf.WriteString(header)
	cmd := exec.Command(bin, args...)
	cmd.Dir = stateDir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Proc{}, fmt.Errorf("start %s: %w", name, err)
	}
	go cmd.Wait() //nolint:errcheck // reaps the child if it exits while we live; state is read from /proc
	st, err := procStartTime(cmd.Process.Pid)
	if err != nil {
		return Proc{}, fmt.Errorf("start %s: %w", name, err)
	}
	return Proc{Name: name, Pid: cmd.Process.Pid, Args: append([]string{bin}, args...), StartTime: st}, nil
}

// procStat returns the state letter and start time of pid from /proc.
func procStat(pid int) (state byte, start uint64, err error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, 0, err
	}
	return st.State[0], st.Starttime, nil
}

func procStartTime(pid int) (uint64, error) {
	_, st, err := procStat(pid)
	return st, err
}

// alive reports whether the recorded process still runs (and is the same one).
func (p Proc) alive() bool {
	state, st, err := procStat(p.Pid)
	return err == nil && st == p.StartTime && state != 'Z' && state != 'X'
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs. A process that is
// already gone (or whose pid now belongs to another process) is left alone.
func (p Proc) stop(grace time.Duration) error {
	if !p.alive() {
		return nil
	}
	if err := syscall.Kill(p.Pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s: %w", p.Name, err)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !p.alive() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Kill(p.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", p.Name, err)
	}
	for i := 0; i < 100 && p.alive(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// deadProc returns an error naming the first started process that exited,
// with the end of its log, or nil.
func (s *State) deadProc() error {
	for _, p := range s.Procs {
		if !p.Down && !p.alive() {
			return fmt.Errorf("%s exited; end of %s:\n%s", p.Name, s.LogFile(p.Name), tail(s.LogFile(p.Name), 15))
		}
	}
	return nil
}

// Exited names the started processes that are no longer running.
func (s *State) Exited() []string {
	var out []string
	for _, p := range s.Procs {
		if !p.Down && !p.alive() {
			out = append(out, p.Name)
		}
	}
	return out
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// RSS returns the resident memory of pid in bytes, from /proc/<pid>/status.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS of %d: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}
