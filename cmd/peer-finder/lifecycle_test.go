package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/flockd/flock/internal/testing/elftest"
	"github.com/flockd/flock/internal/testing/need"
	"github.com/flockd/flock/internal/testing/pfbinary"
	"github.com/flockd/flock/peerfinder/membership"
	"github.com/prometheus/procfs"
)

// A command after -- that ignores SIGTERM is SIGKILLed after -kill-timeout
// (issue 11 #3): peer-finder must not outlive the kubelet's grace period.
func TestExecModeKillTimeoutOnSIGTERM(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 1, 80)
	started := filepath.Join(t.TempDir(), "started")
	script := fmt.Sprintf(`trap '' TERM; touch %s; while :; do sleep 0.02; done`, started)
	p := start(t, append(common(dns.Addr()), "-kill-timeout=300ms", "--", "sh", "-c", script)...)
	waitFile(t, started, func(string) bool { _, err := os.Stat(started); return err == nil })
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t); code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit status %d, want %d (the command SIGKILLed after -kill-timeout)", code, 128+int(syscall.SIGKILL))
	}
}

// An init run stopped before it delivered does not exit 0 (issue 11 #14):
// `peer-finder -on-start=... && app` must not start app.
func TestInitModeStoppedBeforeDeliveryIsNoSuccess(t *testing.T) {
	for _, tc := range []struct {
		name string
		hook string // on-start body
		self bool   // self is in the answer, so on-start runs
	}{
		{"waiting for self", "exit 0", false},
		{"on-start failing", "exit 1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dns := dnstest.New(t)
			if tc.self {
				dns.Peers(svc, "web", 1, 80)
			} else {
				dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(1), Port: 80})
			}
			dir := t.TempDir()
			ran := filepath.Join(dir, "ran")
			hook := filepath.Join(dir, "on-start.sh")
			if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+ran+"\n"+tc.hook+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			p := start(t, append(common(dns.Addr()), "-on-start="+hook)...)
			if tc.self {
				waitFile(t, ran, func(string) bool { _, err := os.Stat(ran); return err == nil })
			} else {
				awaitWaiting(t, p, membership.WaitSelf)
			}
			if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.Wait(t); code != 4 {
				t.Fatalf("exit status %d, want 4 (init mode stopped before it delivered)", code)
			}
		})
	}
}

// A -- run stopped before its first delivery does not exit 0 (issue 36 #6):
// the command never ran, so an evicted pid-1 Job pod still waiting for its
// peers must not end Succeeded. Also with -on-start, and as pid 1 of its
// own pid namespace, as in a container.
func TestExecModeStoppedBeforeDeliveryIsNoSuccess(t *testing.T) {
	for _, tc := range []struct {
		name    string
		onStart bool
		pid1    bool
	}{
		{"command only", false, false},
		{"with on-start", true, false},
		{"as pid 1", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.pid1 {
				need.Root(t, "to start peer-finder as pid 1 of a new pid namespace")
			}
			dns := dnstest.New(t)
			dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(1), Port: 80}) // self (web-0) missing
			dir := t.TempDir()
			ran := filepath.Join(dir, "ran")
			args := common(dns.Addr())
			if tc.onStart {
				hook := filepath.Join(dir, "on-start.sh")
				if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-on-start="+hook)
			}
			args = append(args, "--", "sh", "-c", "touch "+ran)
			var p *process
			if tc.pid1 {
				unshare, err := exec.LookPath("unshare")
				if err != nil {
					t.Skip("needs unshare(1) to start peer-finder as pid 1")
				}
				p = startProgram(t, unshare, append([]string{"--pid", "--fork", "--mount-proc", "--kill-child", binary}, args...)...)
			} else {
				p = start(t, args...)
			}
			awaitWaiting(t, p, membership.WaitSelf)
			target := p.Cmd.Process.Pid
			if tc.pid1 { // signal peer-finder itself, not unshare
				pf := childrenOf(target)
				if len(pf) != 1 {
					t.Fatalf("unshare has children %v, want exactly peer-finder", pf)
				}
				target = pf[0]
			}
			if err := syscall.Kill(target, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.Wait(t); code != 4 {
				t.Fatalf("exit status %d, want 4 (stopped before the command ran)", code)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Errorf("the command or on-start ran, though self was never found")
			}
		})
	}
}

// Hooks and commands that can never run are usage errors at start (issue 11
// #13), not retried forever.
func TestHooksThatCanNeverRunExitTwo(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 1, 80)
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noExec := write("no-exec.sh", "#!/bin/sh\n", 0o644)
	noShebang := write("no-shebang", "echo hi\n", 0o755)
	badInterp := write("bad-interp.sh", "#!/nonexistent/sh\n", 0o755)
	good := write("good.sh", "#!/bin/sh\nexit 0\n", 0o755)
	crlf := write("crlf.sh", "#!/bin/sh\r\nexit 0\r\n", 0o755)
	noLoader := write("no-loader", string(elftest.WithInterp(t, "/bin/true", "/nonexistent/ld-flock.so")), 0o755)
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{"missing on-start", []string{"-on-start=" + filepath.Join(dir, "missing.sh")}, "-on-start"},
		{"not executable", []string{"-on-start=" + noExec}, "-on-start"},
		{"a directory", []string{"-on-change=" + dir}, "-on-change"},
		{"no interpreter line", []string{"-on-start=" + good, "-on-change=" + noShebang}, "-on-change"},
		{"missing interpreter", []string{"-on-start=" + badInterp}, "-on-start"},
		{"CRLF #! line", []string{"-on-change=" + crlf}, "-on-change"}, // issue 36 #20
		{"CRLF #! line on-start", []string{"-on-start=" + crlf}, "-on-start"},
		{"ELF loader missing", []string{"-on-change=" + noLoader}, "-on-change"},
		{"ELF loader missing after --", []string{"--", noLoader}, "--"},
		{"command not found", []string{"--", "/nonexistent"}, "--"},
		{"command not in PATH", []string{"--", "no-such-command-flock"}, "--"},
		{"empty command", []string{"--", ""}, "peer-finder: --: "}, // not "---: " (issue 11 #18)
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary, append(common(dns.Addr()), tc.args...)...)
			cmd.Env = append(os.Environ(), "POD_NAMESPACE=ns1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("peer-finder did not exit; stderr:\n%s", stderr.String())
			}
			if code := pfbinary.ExitStatus(cmd.ProcessState); code != 2 || !strings.Contains(stderr.String(), tc.flag) {
				t.Fatalf("status %d, stderr %q; want 2 naming %s", code, stderr.String(), tc.flag)
			}
		})
	}
}

// As pid 1 of its container without --, peer-finder reaps the orphans its
// hooks leave (issue 11 #5), and the hooks' statuses still count.
func TestPID1ReapsOrphansOfHooks(t *testing.T) {
	need.Root(t, "to start peer-finder as pid 1 of a new pid namespace")
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 1, 80)
	dir := t.TempDir()
	// Each run leaves an orphan (a background sleep whose parent exits) and
	// fails the first time, so a stolen exit status would show as a missing
	// retry.
	hook := filepath.Join(dir, "on-change.sh")
	body := "#!/bin/sh\nsleep 0.05 &\nn=$(ls " + dir + "/runs 2>/dev/null | wc -l)\nmkdir -p " + dir + "/runs\ntouch " + dir + "/runs/$n\n[ \"$n\" -gt 0 ]\n"
	if err := os.WriteFile(hook, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	// As in a container: a new pid namespace with its own /proc, where
	// peer-finder is pid 1 (unshare forks it, mounts /proc, and execs it).
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare(1) to start peer-finder as pid 1 with its own /proc")
	}
	p := startProgram(t, unshare, append([]string{"--pid", "--fork", "--mount-proc", "--kill-child", binary}, append(common(dns.Addr()), "-on-change="+hook)...)...)
	runs := filepath.Join(dir, "runs")
	count := func() int { e, _ := os.ReadDir(runs); return len(e) }
	// The first run fails; its retry must come (its status was not stolen).
	for n := 2; n <= 5; n++ {
		await.Poll{Every: 20 * time.Millisecond}.Check(t, func() error {
			if c := count(); c < n {
				return fmt.Errorf("%d hook runs", c)
			}
			return nil
		}, "%d hook runs", n)
		dns.Peers(svc, "web", n, 80)
	}
	// Every orphan exits after 50 ms; none may stay a zombie.
	pf := childrenOf(p.Cmd.Process.Pid) // peer-finder's pid as seen from here
	if len(pf) != 1 {
		t.Fatalf("unshare has children %v, want exactly peer-finder", pf)
	}
	await.Poll{Every: 50 * time.Millisecond}.Check(t, func() error {
		if z := zombiesOf(pf[0]); len(z) > 0 {
			return fmt.Errorf("zombies %v", z)
		}
		return nil
	}, "no zombie left under peer-finder (pid 1 of its namespace)")
	// Only the first run failed: no hook's exit status was taken by the reaper.
	if recs := p.Find("delivery failed, will retry with the newest set"); len(recs) != 1 {
		t.Errorf("failed deliveries %v, want 1 (the first run)", recs)
	}
}

// zombiesOf lists the zombie children of pid, from /proc.
func zombiesOf(pid int) []int { return procChildren(pid, true) }

// childrenOf lists the children of pid, from /proc.
func childrenOf(pid int) []int { return procChildren(pid, false) }

func procChildren(pid int, zombies bool) []int {
	procs, _ := procfs.AllProcs()
	var z []int
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && (st.State == "Z" || !zombies) && st.PPID == pid {
			z = append(z, p.PID)
		}
	}
	return z
}

// A hosts file that cannot be written (here a stray BEGIN marker written by
// someone else) does not stop the hooks (issue 11 #17); it is logged once.
func TestBrokenHostsFileDoesNotBlockHooks(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 1, 80)
	dir := t.TempDir()
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1\tlocalhost\n# BEGIN flock peer-finder web\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(dir, "runs")
	p := start(t, append(common(dns.Addr()), "-hosts-file="+hosts, "-on-change="+recorder(t, runs, "on-change", false))...)
	if err := os.MkdirAll(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	waitRuns(t, runs, 1)
	await.Until(t, func() bool { return len(p.Find("sink failing")) > 0 }, "a \"sink failing\" record")
	if recs := p.Find("sink failing"); len(recs) != 1 {
		t.Errorf("'sink failing' records %v, want 1", recs)
	}
}
