package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/flockd/flock/internal/testing/need"
)

// When the -- command exits, what it left in its process group is killed
// before peer-finder exits with its status (issue 36 #17): peer-finder is
// a child subreaper (not pid 1) in -- mode, as under tini or with
// shareProcessNamespace, and the command's background processes outlived
// it, re-parented to the real init. A process that ignores SIGTERM is
// SIGKILLed.
func TestExecCommandGroupKilledWhenCommandExits(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 1, 80)
	dir := t.TempDir()
	script := fmt.Sprintf(`sleep 300 & echo $! > %[1]s/bg.tmp; mv %[1]s/bg.tmp %[1]s/bg
sh -c 'trap "" TERM; echo $$ > %[1]s/stubborn.tmp; mv %[1]s/stubborn.tmp %[1]s/stubborn; while :; do sleep 0.05; done' &
while [ ! -e %[1]s/stubborn ]; do sleep 0.01; done
exit 3`, dir)
	p := start(t, append(common(dns.Addr()), "-kill-timeout=1s", "--", "sh", "-c", script)...)
	if code := p.Wait(t); code != 3 {
		t.Fatalf("exit status %d, want the command's 3", code)
	}
	for _, f := range []string{"bg", "stubborn"} {
		pid := readPID(t, filepath.Join(dir, f))
		if running(pid) {
			t.Errorf("the command's background process %s (pid %d) outlived peer-finder", f, pid)
			_ = os.Remove(filepath.Join(dir, f))
		}
	}
}

// The -- command, in its own process group since issue 36 #17, is put in
// the foreground of the terminal on stdin, so an interactive command
// (`kubectl run -it ... -- peer-finder ... -- sh`) still reads it rather
// than being stopped by SIGTTIN.
func TestExecCommandReadsTerminal(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 1, 80)
	ptmx, tty := openPTY(t)
	dir := t.TempDir()
	got := filepath.Join(dir, "got")
	_, done := startCommand(t, func(cmd *exec.Cmd) {
		cmd.Stdin = tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}, append(common(dns.Addr()), "--", "sh", "-c", "read line; echo \"$line\" > "+got)...)
	tty.Close()
	go func() { _, _ = io.Copy(io.Discard, ptmx) }() // the terminal's output
	if _, err := ptmx.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	waitFile(t, got, func(s string) bool { return s == "hello\n" })
	err := <-done
	done <- err
	if err != nil {
		t.Fatalf("peer-finder: %v", err)
	}
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		need.Unavailable(t, "root", fmt.Sprintf("no pseudo-terminals: %v", err))
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptmx, tty
}
