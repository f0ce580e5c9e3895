// Package reap reaps orphaned zombie processes without stealing the exit
// status of children that someone in this process is waiting for.
//
// A process that is pid 1 of a container (or a child subreaper) inherits
// every orphan below it and must wait for them, or they stay zombies. The
// well-known trap is the naive loop "for { wait4(-1, ...) }": it also reaps
// the children that os/exec started and is about to Wait for, so cmd.Wait
// fails with ECHILD and the hook's exit status is lost.
//
// Run reaps only zombies that nobody else owns:
//
//   - It wakes on SIGCHLD and peeks with waitid(P_ALL, WEXITED|WNOHANG|WNOWAIT),
//     which reports a waitable child without reaping it.
//   - It lists this process's zombie children from /proc/<pid>/stat.
//   - A zombie is owned, and left alone, when it was started through Start
//     (registered until Wait returns), or when this process holds a pidfd
//     for it: since Go 1.23, os.StartProcess (and so exec.Cmd) keeps a pidfd
//     of each child it started until its Wait has reaped it, and
//     /proc/self/fdinfo shows that pidfd's "Pid:". So plain exec.Cmd users —
//     such as the hook sink — are recognised without any cooperation; Start
//     and Wait exist for code paths and kernels where pidfds are unavailable.
//   - Any other zombie is an orphan and is reaped with wait4(pid, WNOHANG),
//     by pid, once it has been a zombie for Options.Grace (a second line of
//     defence for children whose ownership cannot be seen; a Wait that is
//     already blocked reaps its child within microseconds).
//
// Starts through Start and reaping are serialised, so a child can never be
// reaped between its fork and its registration.
package reap

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// Options configure Run.
type Options struct {
	// Grace is how long an orphan must have been a zombie before it is
	// reaped; 0 reaps at once. DefaultGrace is a good value.
	Grace time.Duration
	// Subreaper registers the process as a child subreaper
	// (PR_SET_CHILD_SUBREAPER) when it is not pid 1, so orphans of its
	// descendants come to it rather than to the real init.
	Subreaper bool
	// Logger receives a debug record per reaped orphan; slog.Default() when nil.
	Logger *slog.Logger
	// Interval is how often a pending orphan is looked at again while it is
	// within its grace; Grace/2 (at least 10ms) when zero.
	Interval time.Duration
}

// DefaultGrace is the default Options.Grace.
const DefaultGrace = 200 * time.Millisecond

var (
	// startMu serialises Start (readers) with a reaping pass (writer).
	startMu sync.RWMutex
	ownedMu sync.Mutex
	owned   = map[int]int{} // pid -> registrations
)

// Start starts cmd and registers its pid as owned until Wait(cmd) returns,
// so Run never reaps it. Use it (with Wait) for children whose exit status
// matters when Run may be reaping.
func Start(cmd *exec.Cmd) error {
	startMu.RLock()
	defer startMu.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	ownedMu.Lock()
	owned[cmd.Process.Pid]++
	ownedMu.Unlock()
	return nil
}

// Wait waits for a cmd started with Start and then unregisters it.
func Wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	ownedMu.Lock()
	if owned[cmd.Process.Pid]--; owned[cmd.Process.Pid] <= 0 {
		delete(owned, cmd.Process.Pid)
	}
	ownedMu.Unlock()
	return err
}

// SetSubreaper registers this process as a child subreaper.
func SetSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	return nil
}

// Needed reports whether orphans come to this process, so it must reap them:
// it is pid 1 (of its pid namespace: a container) or a child subreaper (the
// setting survives execve, so a wrapper may have set it).
func Needed() bool {
	if os.Getpid() == 1 {
		return true
	}
	var on int32
	err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&on)), 0, 0, 0)
	return err == nil && on != 0
}

// Run reaps orphaned zombies until ctx is done. Run one at a time per
// process. It returns ctx's error, or an error when it cannot become a
// subreaper.
func Run(ctx context.Context, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.Subreaper && os.Getpid() != 1 {
		if err := SetSubreaper(); err != nil {
			return err
		}
	}
	interval := opts.Interval
	if interval <= 0 {
		interval = max(opts.Grace/2, 10*time.Millisecond)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)

	seen := map[int]time.Time{} // unowned zombie -> first seen
	var timer *time.Timer
	var tick <-chan time.Time
	for {
		pending := pass(seen, opts.Grace, time.Now(), log)
		switch {
		case pending && tick == nil:
			timer = time.NewTimer(interval)
			tick = timer.C
		case !pending && timer != nil:
			timer.Stop()
			timer, tick = nil, nil
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return ctx.Err()
		case <-sigs:
		case <-tick:
			timer, tick = nil, nil
		}
	}
}

// pass reaps the unowned zombies that are past their grace and reports
// whether some are still within it.
func pass(seen map[int]time.Time, grace time.Duration, now time.Time, log *slog.Logger) bool {
	if !anyZombie() {
		clear(seen)
		return false
	}
	startMu.Lock()
	defer startMu.Unlock()
	zombies, err := zombieChildren()
	if err != nil {
		log.Warn("reaper: cannot list child processes", "err", err)
		return true
	}
	held := pidfdPids()
	ownedMu.Lock()
	reg := make(map[int]bool, len(owned))
	for pid := range owned {
		reg[pid] = true
	}
	ownedMu.Unlock()

	pending := false
	live := map[int]bool{}
	for _, pid := range zombies {
		live[pid] = true
		if reg[pid] || held[pid] {
			continue
		}
		first, ok := seen[pid]
		if !ok {
			first = now
			seen[pid] = now
		}
		if now.Sub(first) < grace {
			pending = true
			continue
		}
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		delete(seen, pid)
		if err == nil && got == pid {
			log.Debug("reaper: orphan reaped", "pid", pid, "status", ExitCode(ws))
		}
	}
	for pid := range seen {
		if !live[pid] {
			delete(seen, pid)
		}
	}
	return pending
}

// anyZombie peeks, without reaping, whether some child is waitable.
func anyZombie() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil {
		return false // ECHILD: no children at all
	}
	// With WNOHANG and nothing waitable, si_pid is 0. Siginfo's layout puts
	// si_pid right after signo, errno, code (3 int32) on Linux.
	return siginfoPid(&info) != 0
}

// zombieChildren lists the pids of this process's children in state Z.
func zombieChildren() ([]int, error) {
	self := os.Getpid()
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("read /proc: %w", err)
	}
	var pids []int
	for _, p := range procs {
		st, err := p.Stat()
		if err == nil && st.State == "Z" && st.PPID == self { // else gone
			pids = append(pids, p.PID)
		}
	}
	return pids, nil
}

// pidfdPids returns the pids for which this process holds a pidfd, read from
// the "Pid:" line of /proc/self/fdinfo/<fd>.
func pidfdPids() map[int]bool {
	held := map[int]bool{}
	entries, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		return held
	}
	for _, e := range entries {
		f, err := os.Open(filepath.Join("/proc/self/fdinfo", e.Name()))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Pid:")); ok {
				if pid, err := strconv.Atoi(string(bytes.TrimSpace(v))); err == nil && pid > 0 {
					held[pid] = true
				}
				break
			}
		}
		_ = f.Close()
	}
	return held
}

// ExitCode returns the shell-style status of ws: the exit code, or 128+signal
// when the process was killed by a signal.
func ExitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// siginfoPid returns si_pid of a SIGCHLD siginfo: after three int32 fields
// (signo, errno, code), at the start of the union, which is aligned to the
// pointer size.
func siginfoPid(info *unix.Siginfo) int32 {
	off := uintptr(12)
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off = 16
	}
	return *(*int32)(unsafe.Add(unsafe.Pointer(info), off))
}

// KillGroup sends SIGTERM to the process group pgid and SIGKILL once grace
// has passed, unless the whole group is gone by then. exited is closed when
// the group leader has been waited for (it may be closed already). Members
// left as zombies count until they are reaped, so with orphans coming to
// this process a reaper (Run) should be running.
func KillGroup(pgid int, exited <-chan struct{}, grace time.Duration) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	select {
	case <-exited:
	case <-deadline.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return
	}
	// The leader is gone; other members (or their zombies) may remain.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for syscall.Kill(-pgid, 0) == nil {
		select {
		case <-deadline.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return
		case <-tick.C:
		}
	}
}
