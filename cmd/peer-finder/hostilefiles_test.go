package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/dnstest"
)

// TestFIFOAtHostsFileFailsThatSinkOnly runs the real binary with a FIFO at
// -hosts-file: the hosts file sink fails with an error naming the sink, the
// file and what it is, /readyz names it, the hook runs meanwhile, the FIFO
// is left alone, and SIGTERM still ends peer-finder at once (issue 36 #8:
// the process sat in a read of the FIFO under the file's lock, the hook
// never ran and SIGTERM did nothing).
func TestFIFOAtHostsFileFailsThatSinkOnly(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 2, 80)
	dir := t.TempDir()
	hosts, runDir := filepath.Join(dir, "hosts"), filepath.Join(dir, "runs")
	if err := syscall.Mkfifo(hosts, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := start(t, append(common(dns.Addr()), "-hosts-file="+hosts, "-metrics-addr=127.0.0.1:0",
		"-on-change="+recorder(t, runDir, "on-change", false))...)
	waitRuns(t, runDir, 1)
	assertSinkFailing(t, p, "hosts-file", hosts, "not a regular file")
	if fi, err := os.Lstat(hosts); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO was replaced or removed (err %v)", err)
	}

	begin := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Errorf("exit status after SIGTERM = %d, want 0", code)
	}
	// Not a measure of speed: a read blocked on the FIFO held SIGTERM off
	// until the lock wait (5 s) ran out, or for ever.
	if took := time.Since(begin); took > 4*time.Second {
		t.Errorf("peer-finder took %v to exit after SIGTERM", took)
	}
}

// assertSinkFailing waits for peer-finder's "sink failing" record and checks
// that it and /readyz name the sink and path, and the record says why.
func assertSinkFailing(t *testing.T, p *process, sink, path, why string) {
	t.Helper()
	waitFile(t, "/dev/null", func(string) bool { return strings.Contains(p.stderr.String(), "sink failing") })
	log := p.stderr.String()
	failing := lineWith(log, "sink failing")
	if !strings.Contains(failing, "sink="+sink) || !strings.Contains(failing, path) || !strings.Contains(failing, why) {
		t.Errorf("the failing record does not name the sink, %s and %q:\n%s", path, why, failing)
	}
	addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(lineWith(log, "serving metrics"))
	if addr == nil {
		t.Fatalf("no metrics address in:\n%s", log)
	}
	ready := httpGet(t, "http://"+addr[1]+"/readyz")
	t.Logf("log: %s\n/readyz: %s", failing, ready)
	if !strings.Contains(ready, "sink "+sink+" failing") || !strings.Contains(ready, path) {
		t.Errorf("/readyz does not name the failing sink and %s:\n%s", path, ready)
	}
}
