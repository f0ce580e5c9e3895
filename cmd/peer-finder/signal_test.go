package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/flockd/flock/internal/testing/need"
	"github.com/flockd/flock/internal/testing/pfbinary"
	"github.com/flockd/flock/peerfinder/membership"
)

// SIGHUP and SIGQUIT stop peer-finder as SIGTERM does while no -- command
// runs (issue 36 #10): a sidecar died of SIGHUP (status 129; 2 as pid 1)
// and left its running hook behind. Now the exit status is SIGTERM's (0 for
// a sidecar) and the running hook's process group gets SIGTERM first, also
// as pid 1 of a pid namespace.
func TestHUPAndQUITStopLikeTERMAndKillTheHook(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		pid1 bool
	}{
		{"HUP", syscall.SIGHUP, false},
		{"QUIT", syscall.SIGQUIT, false},
		{"HUP as pid 1", syscall.SIGHUP, true},
		{"QUIT as pid 1", syscall.SIGQUIT, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dns := dnstest.New(t)
			dns.Peers(svc, "web", 1, 80)
			dir := t.TempDir()
			hook := filepath.Join(dir, "on-change.sh")
			// The hook and a background process of its group record the
			// SIGTERM they get; it runs until then.
			body := fmt.Sprintf(`#!/bin/sh
D=%q
sh -c 'trap "echo term > $0/bg-term; exit 0" TERM; echo $$ > $0/bg; while :; do sleep 0.05; done' "$D" &
trap 'echo term > "$D/term"; exit 1' TERM
echo $$ > "$D/pid"
while :; do sleep 0.05; done
`, dir)
			if err := os.WriteFile(hook, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
			args := append(common(dns.Addr()), "-on-change="+hook)
			p := startMaybePID1(t, tc.pid1, args...)
			readPID(t, filepath.Join(dir, "pid"))
			readPID(t, filepath.Join(dir, "bg"))
			if err := syscall.Kill(peerFinderPID(t, p, tc.pid1), tc.sig); err != nil {
				t.Fatal(err)
			}
			if code := p.Wait(t); code != 0 {
				t.Fatalf("exit status %d, want 0 (a sidecar stopped, as by SIGTERM)", code)
			}
			for _, f := range []string{"term", "bg-term"} {
				if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || strings.TrimSpace(string(b)) != "term" {
					t.Errorf("%s: %q, %v; want the hook's process group to have got SIGTERM", f, b, err)
				}
			}
			if recs := p.Find("stopping"); len(recs) != 1 || !strings.Contains(recs[0].Attrs["cause"], tc.sig.String()) {
				t.Errorf("no record of stopping on %v: %v", tc.sig, recs)
			}
		})
	}
}

// In -- mode SIGHUP before the command started stops peer-finder like
// SIGTERM (status 4: nothing delivered); once the command runs it is only
// forwarded to it, as tini does (a reload), and peer-finder lives on.
func TestHUPInExecMode(t *testing.T) {
	t.Run("before the command", func(t *testing.T) {
		dns := dnstest.New(t)
		dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(1), Port: 80}) // self missing
		p := start(t, append(common(dns.Addr()), "--", "true")...)
		awaitWaiting(t, p, membership.WaitSelf)
		if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(t); code != 4 {
			t.Fatalf("exit status %d, want 4 (stopped before the command ran)", code)
		}
	})
	t.Run("while the command runs", func(t *testing.T) {
		dns := dnstest.New(t)
		dns.Peers(svc, "web", 1, 80)
		dir := t.TempDir()
		script := fmt.Sprintf(`trap 'echo hup > %[1]s/hup; exit 7' HUP; touch %[1]s/started; while :; do sleep 0.05; done`, dir)
		p := start(t, append(common(dns.Addr()), "--", "sh", "-c", script)...)
		started := filepath.Join(dir, "started")
		await.Until(t, func() bool { _, err := os.Stat(started); return err == nil }, "the command started")
		if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(t); code != 7 {
			t.Fatalf("exit status %d, want the command's 7 (it got the forwarded SIGHUP)", code)
		}
	})
}

// startMaybePID1 starts peer-finder, as pid 1 of a new pid namespace when
// pid1 is set (root and unshare(1) needed).
func startMaybePID1(t *testing.T, pid1 bool, args ...string) *process {
	t.Helper()
	if !pid1 {
		return start(t, args...)
	}
	need.Root(t, "to start peer-finder as pid 1 of a new pid namespace")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		need.Unavailable(t, "root", "needs unshare(1) to start peer-finder as pid 1")
	}
	return startProgram(t, unshare, append([]string{"--pid", "--fork", "--mount-proc", "--kill-child", binary}, args...)...)
}

// peerFinderPID is the pid of peer-finder itself: p's, or its only child's
// when p is unshare(1).
func peerFinderPID(t *testing.T, p *process, pid1 bool) int {
	t.Helper()
	if !pid1 {
		return p.Cmd.Process.Pid
	}
	var pf []int
	await.Until(t, func() bool { pf = childrenOf(p.Cmd.Process.Pid); return len(pf) == 1 }, "unshare's child peer-finder")
	return pf[0]
}

// peer-finder survives its stderr pipe being closed (issue 36 #20): a Go
// program dies of SIGPIPE on a write to fd 1 or 2 unless it handles the
// signal, so the first log record after the log reader went away (a
// logging agent restarting) killed it. It goes on delivering.
func TestSurvivesClosedStderrPipe(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 1, 80)
	dir := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd, done := startCommand(t, func(cmd *exec.Cmd) { cmd.Stderr = w }, append(common(dns.Addr()), "-on-change="+recorder(t, dir, "on-change", false))...)
	w.Close()
	waitRuns(t, dir, 1)
	r.Close() // the reader goes away; every later log write fails with EPIPE
	dns.Peers(svc, "web", 2, 80)
	waitRuns(t, dir, 2)
	select {
	case err := <-done:
		done <- err
		t.Fatalf("peer-finder ended (%v) after its stderr pipe was closed", err)
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = <-done
	done <- err
	if code := pfbinary.ExitStatus(cmd.ProcessState); code != 0 {
		t.Fatalf("exit status %d (%v), want 0", code, err)
	}
}

// startCommand starts peer-finder with args after setup has adjusted the
// command (its stdio, its session), and returns it with a channel that
// yields its Wait result; it is killed at the end of the test.
func startCommand(t *testing.T, setup func(*exec.Cmd), args ...string) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE=ns1")
	setup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd, done
}
