package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/flockd/flock/internal/testing/need"
	"github.com/flockd/flock/peerfinder/membership"
)

// TestFileSinksOnReadOnlyMount runs the real binary with each file sink on a
// real read-only bind mount (root; peer-finder runs in its own mount
// namespace under unshare -m, so the test still sees the directory
// writable): the sink fails with an error naming the file, the previous
// content stays whole, no temporary file is left, the hosts file does not
// hold back the hook while the JSON file does (README, "Metrics and
// health"), /readyz names the failing sink, and once the mount is writable
// again the newest set is written and the hook runs (fault matrix: a
// read-only file system, per file sink).
func TestFileSinksOnReadOnlyMount(t *testing.T) {
	need.Root(t, "to bind-mount a directory read-only in a private mount namespace")
	for _, tool := range []string{"unshare", "nsenter", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s(1): %v", tool, err)
		}
	}
	for _, tc := range []struct {
		name      string
		file      string
		flags     []string
		previous  string
		holdsBack bool
		written   string // in the file once it can be written
	}{
		{"hosts-file-in-place", "hosts", []string{"-hosts-write-mode=in-place"}, "127.0.0.1\tlocalhost\n", false, "web-1"},
		{"hosts-file-replace", "hosts", []string{"-hosts-write-mode=replace"}, "127.0.0.1\tlocalhost\n", false, "web-1"},
		{"json-file", "peers.json", nil, `{"version":1,"self":"web-0.` + svc + `","generation":1,"peers":[]}` + "\n", true, `"web-1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dns := dnstest.New(t)
			dns.Peers(svc, "web", 2, 80)
			dir := filepath.Join(t.TempDir(), "ro")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, tc.file)
			if err := os.WriteFile(path, []byte(tc.previous), 0o644); err != nil {
				t.Fatal(err)
			}
			flag := "-hosts-file="
			if tc.file == "peers.json" {
				flag = "-json-file="
			}
			runDir := filepath.Join(t.TempDir(), "runs")
			if err := os.MkdirAll(runDir, 0o755); err != nil {
				t.Fatal(err)
			}
			args := append(common(dns.Addr()), flag+path, "-metrics-addr=127.0.0.1:0", "-on-change="+recorder(t, runDir, "on-change", false))
			args = append(args, tc.flags...)
			// unshare -m makes mounts private; sh bind-mounts dir over
			// itself read-only there and execs peer-finder (same pid).
			script := `mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"`
			p := startProgram(t, "unshare", append([]string{"-m", "--propagation", "private", "sh", "-c", script, dir, binary}, args...)...)

			await.Until(t, func() bool { return len(p.Find("sink failing")) > 0 }, "a \"sink failing\" record")
			failing := p.Find("sink failing")[0]
			if err := failing.Attrs["err"]; !strings.Contains(err, path) || !strings.Contains(err, "read-only file system") {
				t.Errorf("the failing record does not name %s and the read-only file system: %v", path, failing)
			}
			ready := httpGet(t, "http://"+metricsAddr(t, p)+"/readyz")
			t.Logf("log: %s\n/readyz: %s", failing, ready)
			if !strings.Contains(ready, "failing") || !strings.Contains(ready, path) {
				t.Errorf("/readyz does not name the failing sink and %s:\n%s", path, ready)
			}
			if tc.holdsBack {
				if rs := runs(t, runDir); len(rs) != 0 {
					t.Errorf("the hook ran %d times past a failing JSON file, which holds back later sinks", len(rs))
				}
			} else {
				waitRuns(t, runDir, 1)
			}
			if b, _ := os.ReadFile(path); string(b) != tc.previous {
				t.Errorf("%s holds %q, want the previous content %q whole", path, b, tc.previous)
			}
			noTempFiles(t, dir)
			if recs := p.Find("sink failing"); len(recs) != 1 {
				t.Errorf("'sink failing' records %v, want 1 (one per change of state)", recs)
			}

			// Writable again (in peer-finder's mount namespace): the
			// retry writes the newest set and the hook runs.
			dns.Peers(svc, "web", 3, 80)
			out, err := exec.Command("nsenter", "-t", strconv.Itoa(p.Cmd.Process.Pid), "-m", "mount", "-o", "remount,bind,rw", dir).CombinedOutput()
			if err != nil {
				t.Fatalf("remount read-write: %v\n%s", err, out)
			}
			waitFile(t, path, func(s string) bool { return strings.Contains(s, "web-2") && strings.Contains(s, tc.written) })
			await.Until(t, func() bool { return len(p.Find("sink recovered")) > 0 }, "a \"sink recovered\" record")
			rs := waitRuns(t, runDir, 1)
			if last := rs[len(rs)-1]; !strings.Contains(last.stdin, fqdn(2)) {
				await.Until(t, func() bool {
					rs := runs(t, runDir)
					return strings.Contains(rs[len(rs)-1].stdin, fqdn(2))
				}, "a run of on-change with %s", fqdn(2))
			}
			noTempFiles(t, dir)
		})
	}
}

// awaitNamesMissing waits for p to log that delivery waits for the
// expected names, name among those missing.
func awaitNamesMissing(t *testing.T, p *process, name string) {
	t.Helper()
	await.Check(t, func() error {
		for _, r := range p.Find("waiting before delivery", "reason", string(membership.WaitNames)) {
			if strings.Contains(r.Attrs["detail"], name) {
				return nil
			}
		}
		return fmt.Errorf("records: %v", p.Logs())
	}, "delivery waiting for the expected name %s", name)
}

// awaitWaiting waits for p to log that delivery waits for reason.
func awaitWaiting(t *testing.T, p *process, reason membership.Reason) {
	t.Helper()
	await.Until(t, func() bool { return len(p.Find("waiting before delivery", "reason", string(reason))) > 0 }, "%s to log waiting for %s", p.Name, reason)
}

// metricsAddr returns the address p serves metrics and health on, as it
// logged it.
func metricsAddr(t *testing.T, p *process) string {
	t.Helper()
	var addr string
	await.Until(t, func() bool {
		recs := p.Find("serving metrics and health")
		if len(recs) > 0 {
			addr = recs[0].Attrs["addr"]
		}
		return addr != ""
	}, "%s to log its metrics address", p.Name)
	return addr
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// noTempFiles fails when dir holds anything but the sink's file.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %v, want only the sink's file (no temporary files)", dir, names)
	}
}
