// What /proc and the terminal say about a process: whether it handles a
// signal (so a reload signal cannot end it), whether a file is a terminal.

package exec

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// readyFor reports whether sending sig to pid cannot end or stop it by the
// signal's default action: pid catches or ignores sig, or sig's default is
// to do nothing, or pid's status cannot be read (not Linux, or pid is gone).
func readyFor(pid int, sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGCHLD, syscall.SIGCONT, syscall.SIGURG, syscall.SIGWINCH: // ignored by default
		return true
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return true
	}
	handled, err := handles(status, sig)
	return err != nil || handled
}

// handles reports whether the process whose /proc/PID/status is status
// catches or ignores sig (its SigCgt or SigIgn mask has sig's bit).
func handles(status []byte, sig syscall.Signal) (bool, error) {
	found := 0
	var mask uint64
	for line := range strings.Lines(string(status)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "SigCgt" && name != "SigIgn") {
			continue
		}
		m, err := strconv.ParseUint(strings.TrimSpace(value), 16, 64)
		if err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		mask |= m
		found++
	}
	if found != 2 {
		return false, errors.New("no SigCgt and SigIgn in the status")
	}
	return sig >= 1 && sig <= 64 && mask&(1<<(sig-1)) != 0, nil
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
