package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/prometheus/procfs"
)

// TestHookKilledFromOutsideIsRetriedWithNewestSet SIGKILLs a running hook's
// process from outside (as an OOM kill or an operator would) while the peer
// set changes (fault matrix: hook is killed): the delivery counts as failed
// and is retried with the newest set, the killed hook is not left a zombie
// of peer-finder, and the background process it had started in its process
// group does not outlive the killed run.
func TestHookKilledFromOutsideIsRetriedWithNewestSet(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 1, 80)
	dir := t.TempDir()
	hook := filepath.Join(dir, "hook.sh")
	// The first run starts a background sleep and waits for it, until the
	// test kills it; later runs record their stdin and exit 0.
	body := fmt.Sprintf(`#!/bin/sh
D=%q
if [ ! -e "$D/first" ]; then
	: > "$D/first"
	sleep 300 &
	echo $! > "$D/bg.tmp"; mv "$D/bg.tmp" "$D/bg"
	echo $$ > "$D/pid.tmp"; mv "$D/pid.tmp" "$D/pid"
	wait
	exit 0
fi
cat > "$D/stdin.tmp"; mv "$D/stdin.tmp" "$D/stdin"
`, dir)
	if err := os.WriteFile(hook, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	p := start(t, append(common(dns.Addr()), "-on-change="+hook)...)
	pid := readPID(t, filepath.Join(dir, "pid"))
	bg := readPID(t, filepath.Join(dir, "bg"))

	// A newer set is published while the hook runs; then the hook dies.
	dns.Peers(svc, "web", 2, 80)
	await.Until(t, func() bool { return len(p.Find("", "peers", "2")) > 0 }, "a record of the set of 2")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the hook: %v", err)
	}
	got := waitFile(t, filepath.Join(dir, "stdin"), func(s string) bool { return s != "" })
	if want := fqdn(0) + "\n" + fqdn(1); got != want {
		t.Errorf("the retry got stdin %q, want the newest set %q", got, want)
	}
	if failed := p.Find("delivery failed, will retry with the newest set"); len(failed) == 0 || !strings.Contains(failed[0].Attrs["err"], "signal: killed") {
		t.Errorf("the killed run is not reported as failed with its signal: %v", failed)
	}
	await.Until(t, func() bool { return len(zombiesOf(p.Cmd.Process.Pid)) == 0 }, "no zombie under peer-finder")
	await.Until(t, func() bool { return !running(bg) }, "the killed hook's background process %d gone", bg)
}

// readPID waits for path to hold a pid.
func readPID(t *testing.T, path string) int {
	t.Helper()
	s := waitFile(t, path, func(s string) bool { return strings.TrimSpace(s) != "" })
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// running reports whether pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	return err == nil && st.State != "Z"
}
