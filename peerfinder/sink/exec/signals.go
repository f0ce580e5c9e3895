// Signals: parsing -reload-signal, which signals may reload a command, and
// which ones peer-finder forwards to it.

package exec

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ForwardedSignals are forwarded to the child by default.
var ForwardedSignals = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
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
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q", s)
}

// CheckReloadSignal reports why sig cannot be a reload signal: one the
// child cannot catch (KILL, STOP; 32 and 33, which the C library keeps for
// its threads) or whose default action stops the child (TSTP, TTIN, TTOU)
// would end or freeze it instead of telling it about a change. 0 (none) is
// fine.
func CheckReloadSignal(sig syscall.Signal) error {
	switch {
	case sig == 0:
		return nil
	case sig == syscall.SIGKILL || sig == syscall.SIGSTOP:
		return fmt.Errorf("%v cannot be caught: it would kill or freeze the command, not reload it", sig)
	case sig == syscall.SIGTSTP || sig == syscall.SIGTTIN || sig == syscall.SIGTTOU:
		return fmt.Errorf("%v stops a command that does not catch it", sig)
	case sig == 32 || sig == 33:
		return fmt.Errorf("signal %d is reserved by the C library's threads; programs cannot catch it", int(sig))
	case sig < 0 || sig > 64:
		return fmt.Errorf("signal %d out of range", int(sig))
	}
	return nil
}
