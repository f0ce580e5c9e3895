package main

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/dnstest"
)

// stillRunning fails the test when p exits within d.
func stillRunning(t *testing.T, p *process, d time.Duration, why string) {
	t.Helper()
	select {
	case <-p.Done():
		t.Fatalf("peer-finder exited with status %d %s", p.Status(), why)
	case <-time.After(d):
	}
}

// TestSidecarBootstrapTimeoutNeverFiresAfterDelivery: with -on-change (a
// sidecar) and -bootstrap-timeout, a set delivered in time means the
// timeout never fires: peer-finder keeps running and delivering after it.
func TestSidecarBootstrapTimeoutNeverFiresAfterDelivery(t *testing.T) {
	dns := dnstest.New(t)
	dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(0), Port: 80})
	dir := t.TempDir()
	p := start(t, append(common(dns.Addr()), "-bootstrap-timeout=1s", "-on-change="+recorder(t, dir, "on-change", false))...)
	waitRuns(t, dir, 1)
	stillRunning(t, p, 2*time.Second, "after the first set was delivered in time (-bootstrap-timeout=1s)")
	dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(0), Port: 80}, dnstest.SRVRecord{Target: fqdn(1), Port: 80})
	waitRuns(t, dir, 2)
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t); code != 0 {
		t.Errorf("exit status after SIGTERM = %d, want 0", code)
	}
}

// TestExecModeBootstrapTimeoutNeverFiresAfterStart: in exec mode the
// command started in time keeps running after -bootstrap-timeout passed,
// and peer-finder exits with its status, not 3.
func TestExecModeBootstrapTimeoutNeverFiresAfterStart(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 1, 80)
	dir := t.TempDir()
	peers, started := filepath.Join(dir, "peers.json"), filepath.Join(dir, "started")
	script := fmt.Sprintf(`echo ok > %s; trap 'exit 7' TERM; while :; do sleep 0.02; done`, started)
	p := start(t, append(common(dns.Addr()), "-bootstrap-timeout=1s", "-json-file="+peers, "--", "sh", "-c", script)...)
	waitFile(t, started, func(s string) bool { return s != "" })
	stillRunning(t, p, 2*time.Second, "after the command started in time (-bootstrap-timeout=1s)")
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t); code != 7 {
		t.Fatalf("exit status %d, want the command's 7", code)
	}
}
