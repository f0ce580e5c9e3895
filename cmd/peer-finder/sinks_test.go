package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/flockd/flock/peerfinder/sink"
)

// These tests run the real binary with the file and exec sinks against a
// loopback DNS server.

func waitFile(t *testing.T, path string, ok func(string) bool) string {
	t.Helper()
	var b []byte
	await.Poll{Every: 20 * time.Millisecond}.Check(t, func() error {
		if b, _ = os.ReadFile(path); !ok(string(b)) {
			return fmt.Errorf("last content:\n%s", b)
		}
		return nil
	}, "%s to become as wanted", path)
	return string(b)
}

func TestInitModeHostsFileWaitsForAllExpectedNames(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 2, 80) // web-2 is not there yet
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1\tlocalhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, append(common(dns.Addr()), "-hosts-file="+hosts, "-hosts-expect=web=3", "-wait-for-all", "-once")...)
	// The wait is membership's expected-names gate, logged with its reason
	// and the missing names, not a failing sink.
	awaitNamesMissing(t, p, "web-2")
	select {
	case <-p.Done():
		t.Fatal("init mode exited before every expected name had an address")
	case <-time.After(300 * time.Millisecond):
	}
	if recs := p.Find("sink failing"); len(recs) > 0 {
		t.Errorf("waiting for expected names was logged as a failing sink: %v", recs)
	}
	dns.Peers(svc, "web", 3, 80)
	if code := p.Wait(t); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
	b, _ := os.ReadFile(hosts)
	b = regexp.MustCompile(`(?m)^# written by web-0 pid \d+\n`).ReplaceAll(b, nil) // the writer's line
	want := "127.0.0.1\tlocalhost\n# BEGIN flock peer-finder web\n10.0.0.0\tweb-0\n10.0.0.1\tweb-1\n10.0.0.2\tweb-2\n# END flock peer-finder web\n"
	if string(b) != want {
		t.Errorf("hosts file:\n%s\nwant:\n%s", b, want)
	}
}

func TestInitModeWaitForAllTimesOut(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 1, 80)
	hosts := filepath.Join(t.TempDir(), "hosts")
	p := start(t, append(common(dns.Addr()), "-hosts-file="+hosts, "-hosts-expect=web-0,web-1", "-wait-for-all", "-once", "-bootstrap-timeout=1s")...)
	if code := p.Wait(t); code != 3 {
		t.Fatalf("exit status %d, want 3 (bootstrap timeout)", code)
	}
}

func TestExecModeStartsAfterFilesReloadsAndExitsWithStatus(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 2, 80)
	dir := t.TempDir()
	peers, reloads, seen := filepath.Join(dir, "peers.json"), filepath.Join(dir, "reloads"), filepath.Join(dir, "seen")
	// The command records the peers file it saw at start, counts reloads,
	// and exits 7 on SIGTERM.
	script := fmt.Sprintf(`cp %[1]s %[2]s; trap 'echo hup >> %[3]s' HUP; trap 'exit 7' TERM; while :; do sleep 0.02; done`, peers, seen, reloads)
	p := start(t, append(common(dns.Addr()), "-json-file="+peers, "-reload-signal=SIGHUP", "--", "sh", "-c", script)...)
	b := waitFile(t, seen, func(s string) bool { return s != "" })
	var doc sink.Document
	if err := json.Unmarshal([]byte(b), &doc); err != nil || len(doc.Peers) != 2 {
		t.Fatalf("the command started before the JSON file was complete: %v %q", err, b)
	}
	dns.Peers(svc, "web", 3, 80)
	waitFile(t, reloads, func(s string) bool { return strings.Count(s, "hup") == 1 })
	waitFile(t, peers, func(s string) bool { return strings.Count(s, `"fqdn"`) == 3 })
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t); code != 7 {
		t.Fatalf("exit status %d, want the command's 7", code)
	}
}

// TestAddressChangedBackReachesEverySink: web-1's address changes and then
// changes back with its SRV record the same throughout (a pod re-created
// twice, IPAM handing the freed address back); the lines-ip hook, the hosts
// file and the JSON file get each address in turn (issue 36 #1: all three
// kept the second address).
func TestAddressChangedBackReachesEverySink(t *testing.T) {
	dns := dnstest.New(t)
	web1 := dns.Peers(svc, "web", 3, 80)[1]
	dns.SetA(web1, "192.0.2.2")
	dir := t.TempDir()
	hosts, doc, runDir := filepath.Join(dir, "hosts"), filepath.Join(dir, "peers.json"), filepath.Join(dir, "runs")
	if err := os.Mkdir(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	start(t, append(common(dns.Addr()), "-hosts-file="+hosts, "-json-file="+doc, "-format=lines-ip",
		"-on-change="+recorder(t, runDir, "on-change", false))...)
	for i, ip := range []string{"192.0.2.2", "192.0.2.5", "192.0.2.2"} {
		dns.SetA(web1, ip)
		waitFile(t, hosts, func(s string) bool { return strings.Contains(s, ip+"\tweb-1\n") })
		waitFile(t, doc, func(s string) bool {
			var d sink.Document
			if json.Unmarshal([]byte(s), &d) != nil || len(d.Peers) != 3 {
				return false
			}
			return slices.Equal(d.Peers[1].IPs, []string{ip})
		})
		rs := waitRuns(t, runDir, i+1)
		if last := rs[len(rs)-1]; !strings.Contains(last.stdin, web1+" "+ip+"\n") {
			t.Fatalf("change %d: the hook's last run got\n%s\nwant web-1 with %s", i, last.stdin, ip)
		}
	}
}

// TestLockedHostsFileDoesNotBlockLaterSinks: another process holds the
// hosts file's lock (`flock -x hosts sleep 30`). The hosts file sink gives up
// after atomicfile.LockWait with an error naming the sink and the file, the
// hook runs meanwhile, /readyz names the failing sink, and once the lock is
// free the retry writes the newest set (issue 36 #3: the hook never ran,
// nothing was logged, and /readyz named no sink).
func TestLockedHostsFileDoesNotBlockLaterSinks(t *testing.T) {
	dns := dnstest.New(t)
	dns.Peers(svc, "web", 2, 80)
	dir := t.TempDir()
	hosts, runDir := filepath.Join(dir, "hosts"), filepath.Join(dir, "runs")
	if err := os.WriteFile(hosts, []byte("127.0.0.1\tlocalhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	holder, err := os.Open(hosts) // as flock(1) would: another open file description
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	p := start(t, append(common(dns.Addr()), "-hosts-file="+hosts, "-metrics-addr=127.0.0.1:0",
		"-on-change="+recorder(t, runDir, "on-change", false))...)
	waitRuns(t, runDir, 1)
	assertSinkFailing(t, p, "hosts-file", hosts, "held by another writer")
	if b, _ := os.ReadFile(hosts); string(b) != "127.0.0.1\tlocalhost\n" {
		t.Errorf("the locked file was written:\n%s", b)
	}

	dns.Peers(svc, "web", 3, 80)
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	waitFile(t, hosts, func(s string) bool { return strings.Contains(s, "\tweb-2\n") })
	await.Until(t, func() bool { return len(p.Find("sink recovered")) > 0 }, "a \"sink recovered\" record")
	await.Until(t, func() bool {
		rs := runs(t, runDir)
		return strings.Contains(rs[len(rs)-1].stdin, fqdn(2))
	}, "a run of on-change with %s", fqdn(2))
}

// TestTwoWritersOfOneHostsBlock: two peer-finders with the same -hosts-id
// write one hosts file, each with another set (issue 36 #11: they restored
// their blocks over each other forever, "block restored" at info level,
// readers seeing the two sets in turn). Each warns once, naming the other
// by the writer line of its block (pod or host name and pid), /readyz says
// so, and flock_hosts_block_conflicts_total counts it.
func TestTwoWritersOfOneHostsBlock(t *testing.T) {
	dnsA, dnsB := dnstest.New(t), dnstest.New(t)
	dnsA.Peers(svc, "web", 2, 80)
	dnsB.Peers(svc, "web", 3, 80)
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1\tlocalhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := start(t, append(common(dnsA.Addr()), "-hosts-file="+hosts, "-metrics-addr=127.0.0.1:0")...)
	waitFile(t, hosts, func(s string) bool { return strings.Contains(s, "web-1") })
	b := start(t, append(common(dnsB.Addr()), "-hosts-file="+hosts, "-metrics-addr=127.0.0.1:0")...)
	const warning = "hosts file: the block was rewritten by another writer with a different set; writing it again with backoff"
	await.Until(t, func() bool {
		return len(a.Find(warning)) > 0 && len(b.Find(warning)) > 0
	}, "both writers to warn about the other")
	for _, c := range []struct{ p, other *process }{{a, b}, {b, a}} {
		other := fmt.Sprintf("pid %d", c.other.Cmd.Process.Pid)
		if w := c.p.Find(warning)[0]; w.Level != slog.LevelWarn || !strings.Contains(w.Attrs["other_writer"], other) {
			t.Errorf("the warning does not name the other writer (%s): %v", other, w)
		}
		addr := metricsAddr(t, c.p)
		if ready := httpGet(t, "http://"+addr+"/readyz"); !strings.Contains(ready, "sink hosts-file warning") || !strings.Contains(ready, other) {
			t.Errorf("/readyz does not show the conflict with %s:\n%s", other, ready)
		}
		if m := httpGet(t, "http://"+addr+"/metrics"); !regexp.MustCompile(`(?m)^flock_hosts_block_conflicts_total [1-9]`).MatchString(m) {
			t.Errorf("flock_hosts_block_conflicts_total is not counted:\n%s", m)
		}
	}
	// The file is never without a whole block, and restores are no longer
	// logged at info level at every check.
	for _, p := range []*process{a, b} {
		if recs := p.Find("hosts file: block restored after the file was rewritten by someone else"); len(recs) > 2 {
			t.Errorf("%d restores logged: %v", len(recs), recs)
		}
	}
}
