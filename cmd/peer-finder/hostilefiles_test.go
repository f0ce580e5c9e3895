package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
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
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t); code != 0 {
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
	await.Until(t, func() bool { return len(p.Find("sink failing")) > 0 }, "a \"sink failing\" record")
	failing := p.Find("sink failing")[0]
	if err := failing.Attrs["err"]; failing.Attrs["sink"] != sink || !strings.Contains(err, path) || !strings.Contains(err, why) {
		t.Errorf("the failing record does not name the sink, %s and %q: %v", path, why, failing)
	}
	ready := httpGet(t, "http://"+metricsAddr(t, p)+"/readyz")
	t.Logf("log: %s\n/readyz: %s", failing, ready)
	if !strings.Contains(ready, "sink "+sink+" failing") || !strings.Contains(ready, path) {
		t.Errorf("/readyz does not name the failing sink and %s:\n%s", path, ready)
	}
}

// TestJSONFileThatIsNotOursIsRefused runs the real binary with -json-file
// at a file it must not replace: a link a co-tenant of a shared directory
// planted, pointing to a shadow-like file elsewhere (a root peer-finder
// replaced that file whole, mode and owner kept), and an existing hosts
// file (replaced silently). The JSON file sink fails naming the file and
// why, /readyz names it, and the files are left as they were (issue 36 #7,
// #12).
func TestJSONFileThatIsNotOursIsRefused(t *testing.T) {
	const secret = "root:$6$salt$hash:19000:0:99999:7:::\n"
	for _, tc := range []struct {
		name, why string
		make      func(t *testing.T, path string) (check string)
	}{
		{"link to a shadow-like file", "symbolic link", func(t *testing.T, path string) string {
			shadow := filepath.Join(t.TempDir(), "shadow")
			if err := os.WriteFile(shadow, []byte(secret), 0o640); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(shadow, path); err != nil {
				t.Fatal(err)
			}
			return shadow
		}},
		{"hosts file", "not a peer document", func(t *testing.T, path string) string {
			if err := os.WriteFile(path, []byte(secret), 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dns := dnstest.New(t)
			dns.Peers(svc, "web", 2, 80)
			doc := filepath.Join(t.TempDir(), "peers.json")
			check := tc.make(t, doc)
			before, _ := os.Lstat(doc)
			p := start(t, append(common(dns.Addr()), "-json-file="+doc, "-metrics-addr=127.0.0.1:0")...)
			assertSinkFailing(t, p, "json-file", doc, tc.why)
			if b, err := os.ReadFile(check); err != nil || string(b) != secret {
				t.Errorf("%s now holds %q (err %v), want it untouched", check, b, err)
			}
			if after, err := os.Lstat(doc); err != nil || !os.SameFile(before, after) {
				t.Errorf("%s was replaced (err %v)", doc, err)
			}
		})
	}
}
