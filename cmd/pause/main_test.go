package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/need"
)

// build compiles pause once per test into a temporary directory.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// waitExit waits for cmd with a deadline and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("pause did not exit within 10s of the signal")
		return -1
	}
}

func TestExitsZeroOnSignal(t *testing.T) {
	bin := build(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Not pid 1, pause warns once its signal handlers are in place.
			ready := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(stderr).ReadString('\n')
				ready <- line
				_, _ = io.Copy(io.Discard, stderr)
			}()
			select {
			case line := <-ready:
				if !strings.Contains(line, "not pid 1") {
					t.Fatalf("first stderr line %q, want the not-pid-1 warning", line)
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("pause printed nothing within 10s")
			}
			// A SIGCHLD (no child) must not end it; the signal after it must.
			if err := cmd.Process.Signal(syscall.SIGCHLD); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd); code != 0 {
				t.Fatalf("exit code %d after %v, want 0", code, sig)
			}
		})
	}
}

func TestBadArgumentExits2(t *testing.T) {
	bin := build(t)
	for _, args := range [][]string{{"-nope"}, {"extra"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Fatalf("pause %v: %v, want exit 2\n%s", args, err, out)
		}
		if !strings.Contains(string(out), strings.TrimLeft(args[0], "-")) {
			t.Errorf("pause %v: message does not name %q: %s", args, args[0], out)
		}
	}
}

// TestReapsOrphansAsPID1 runs pause as pid 1 of a new pid namespace, starts
// a shell inside that namespace (nsenter) that leaves a short-lived orphan
// behind, and checks the orphan is reparented to pause and then reaped, not
// left a zombie.
func TestReapsOrphansAsPID1(t *testing.T) {
	need.Root(t, "for a new pid namespace")
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("needs nsenter (util-linux)")
	}
	bin := build(t)
	pause := exec.Command(bin)
	pause.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := pause.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = pause.Process.Signal(syscall.SIGTERM)
		if code := waitExit(t, pause); code != 0 {
			t.Errorf("pause exit code %d, want 0", code)
		}
	}()
	// The shell prints the host pid of its background child and exits, so
	// the child (sleep) is orphaned inside the namespace.
	out, err := exec.Command("nsenter", "--target", strconv.Itoa(pause.Process.Pid), "--pid", "--",
		"sh", "-c", `sleep 3 </dev/null >/dev/null 2>&1 & echo $!; exit 0`).Output()
	if err != nil {
		t.Fatalf("nsenter: %v", err)
	}
	// $! is the pid inside the namespace; find the host pid by NSpid.
	nsPid := strings.TrimSpace(string(out))
	host := findByNSPid(t, pause.Process.Pid, nsPid)
	sawZombie := false
	await.Poll{Every: 20 * time.Millisecond}.Check(t, func() error {
		st, err := os.ReadFile("/proc/" + host + "/stat")
		if errors.Is(err, os.ErrNotExist) {
			return nil // reaped
		}
		if err == nil && statState(string(st)) == "Z" {
			sawZombie = true
		}
		return fmt.Errorf("still there (zombie seen: %v): %s", sawZombie, st)
	}, "orphan %s (ns pid %s) to be reaped", host, nsPid)
}

// findByNSPid returns the host pid of the child of ppid whose pid in its
// namespace is nsPid.
func findByNSPid(t *testing.T, ppid int, nsPid string) string {
	t.Helper()
	var host string
	await.Poll{Every: 10 * time.Millisecond}.Until(t, func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			status, err := os.ReadFile("/proc/" + e.Name() + "/status")
			if err != nil {
				continue
			}
			var parent, nspid string
			for _, l := range strings.Split(string(status), "\n") {
				if v, ok := strings.CutPrefix(l, "PPid:"); ok {
					parent = strings.TrimSpace(v)
				}
				if v, ok := strings.CutPrefix(l, "NSpid:"); ok {
					f := strings.Fields(v)
					nspid = f[len(f)-1]
				}
			}
			if parent == strconv.Itoa(ppid) && nspid == nsPid {
				host = e.Name()
				return true
			}
		}
		return false
	}, "a child of pause (%d) with namespace pid %s: the orphan reparented to pause", ppid, nsPid)
	return host
}

func statState(stat string) string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return ""
	}
	return stat[i+2 : i+3]
}
