package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/internal/testing/pfbinary"
	"github.com/flockd/flock/peerfinder/membership"
)

// These tests run the real peer-finder binary against a real DNS server on
// loopback, with real scripts, in the patterns of upstream's manifests.

var binary string

func TestMain(m *testing.M) {
	path, cleanup := pfbinary.Build()
	binary = path
	code := m.Run()
	cleanup()
	os.Exit(code)
}

const svc = "web.ns1.svc.cluster.local"

// recorder writes a script that stores each run's stdin and event into dir,
// as NNN-<name> files, and returns its path.
func recorder(t *testing.T, dir, name string, failFirst bool) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), name+".sh")
	fail := ""
	if failFirst {
		fail = `if [ ! -e "$D/.failed-` + name + `" ]; then touch "$D/.failed-` + name + `"; echo "failing once" >&2; exit 1; fi`
	}
	body := fmt.Sprintf(`#!/bin/sh
D=%q
%s
n=$(ls "$D" | wc -l)
f="$D/$(printf %%03d $n)-%s"
cat > "$f.tmp"
echo "$PEER_FINDER_GENERATION $PEER_FINDER_PEERS_ADDED|$PEER_FINDER_PEERS_REMOVED" > "$f.env"
mv "$f.tmp" "$f"
`, dir, fail, name)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

type run struct {
	name  string
	stdin string
	env   string
}

// runs returns the recorded runs in order.
func runs(t *testing.T, dir string) []run {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var rs []run
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".tmp") || strings.HasSuffix(n, ".env") {
			continue
		}
		stdin, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		env, _ := os.ReadFile(filepath.Join(dir, n+".env"))
		rs = append(rs, run{name: n[4:], stdin: string(stdin), env: strings.TrimSpace(string(env))})
	}
	return rs
}

func waitRuns(t *testing.T, dir string, n int) []run {
	t.Helper()
	var rs []run
	await.Poll{Every: 20 * time.Millisecond}.Check(t, func() error {
		if rs = runs(t, dir); len(rs) < n {
			return fmt.Errorf("have %+v", rs)
		}
		return nil
	}, "%d hook runs", n)
	return rs
}

// process is peer-finder run by these tests.
type process = pfbinary.Process

func start(t *testing.T, args ...string) *process {
	t.Helper()
	return startProgram(t, binary, args...)
}

// startProgram starts prog (peer-finder, or a wrapper that execs it) like
// start: with the test's environment and POD_NAMESPACE=ns1, killed (its
// whole process group) at the end of the test.
func startProgram(t *testing.T, prog string, args ...string) *process {
	t.Helper()
	return pfbinary.Start(t, "peer-finder", prog, args, pfbinary.Options{Env: append(os.Environ(), "POD_NAMESPACE=ns1")})
}

func common(server string) []string {
	return []string{"-service=web", "-domain=cluster.local", "-hostname=web-0", "-dns-server=" + server, "-poll-period=50ms"}
}

func fqdn(n int) string { return fmt.Sprintf("web-%d.%s", n, svc) }

func TestInitModeWaitsForSelfThenRunsOnStartOnceAndExits(t *testing.T) {
	dns := dnstest.New(t)
	dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(2), Port: 80}, dnstest.SRVRecord{Target: fqdn(1), Port: 80})
	dir := t.TempDir()
	// The quotes arrive literally, as from Kubernetes' ZooKeeper manifest.
	p := start(t, append(common(dns.Addr()), `-on-start="`+recorder(t, dir, "on-start", false)+`"`)...)
	// The engine has judged the set without self (and polls on).
	await.Until(t, func() bool { return len(p.Find("waiting before delivery", "reason", string(membership.WaitSelf))) > 0 }, "delivery to wait for self")
	if rs := runs(t, dir); len(rs) != 0 {
		t.Fatalf("a hook ran before self was found: %+v", rs)
	}
	dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(2), Port: 80}, dnstest.SRVRecord{Target: fqdn(0), Port: 80}, dnstest.SRVRecord{Target: fqdn(1), Port: 80})
	if code := p.Wait(t); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
	rs := runs(t, dir)
	want := fqdn(0) + "\n" + fqdn(1) + "\n" + fqdn(2) // sorted, no trailing newline
	if len(rs) != 1 || rs[0].name != "on-start" || rs[0].stdin != want {
		t.Fatalf("runs = %+v, want one on-start with %q", rs, want)
	}
	if recs := p.Find("waiting before delivery", "reason", string(membership.WaitSelf)); len(recs) != 1 {
		t.Errorf("logged self-not-found %d times, want once per change of state: %v", len(recs), recs)
	}
}

func TestSidecarRunsOnChangeForEveryChange(t *testing.T) {
	dns := dnstest.New(t)
	dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(0), Port: 80})
	dir := t.TempDir()
	p := start(t, append(common(dns.Addr()), "-on-change="+recorder(t, dir, "on-change", false))...)
	waitRuns(t, dir, 1)
	dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(0), Port: 80}, dnstest.SRVRecord{Target: fqdn(1), Port: 80})
	waitRuns(t, dir, 2)
	dns.SetBehaviour(svc, dnstest.Behaviour{Rcode: 2}) // SERVFAIL: keep the last set
	failed := dns.Queries("udp")
	await.Until(t, func() bool { return dns.Queries("udp") >= failed+6 }, "6 queries answered SERVFAIL")
	dns.SetBehaviour(svc, dnstest.Behaviour{})
	dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(1), Port: 80}, dnstest.SRVRecord{Target: fqdn(0), Port: 80}, dnstest.SRVRecord{Target: fqdn(3), Port: 80})
	rs := waitRuns(t, dir, 3)
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t); code != 0 {
		t.Errorf("exit status after SIGTERM = %d, want 0", code)
	}
	want := []run{
		{"on-change", fqdn(0), "1 " + fqdn(0) + "|"},
		{"on-change", fqdn(0) + "\n" + fqdn(1), "2 " + fqdn(1) + "|"},
		{"on-change", fqdn(0) + "\n" + fqdn(1) + "\n" + fqdn(3), "3 " + fqdn(3) + "|"},
	}
	if !slices.Equal(rs, want) {
		t.Errorf("runs =\n%+v\nwant\n%+v", rs, want)
	}
}

func TestOnStartThenOnChangeAndFailingHookRetriedWithNewestSet(t *testing.T) {
	dns := dnstest.New(t)
	dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(0), Port: 80})
	dir := t.TempDir()
	start(t, append(common(dns.Addr()), "-trailing-newline",
		"-on-start="+recorder(t, dir, "on-start", true),
		"-on-change="+recorder(t, dir, "on-change", false))...)
	// The first on-start fails; while it backs off the set grows.
	await.Until(t, func() bool { _, err := os.Stat(filepath.Join(dir, ".failed-on-start")); return err == nil }, "on-start to run")
	dns.SetSRV(svc, dnstest.SRVRecord{Target: fqdn(0), Port: 80}, dnstest.SRVRecord{Target: fqdn(1), Port: 80})
	rs := waitRuns(t, dir, 1)
	if rs[0].name != "on-start" {
		t.Fatalf("first successful run = %+v", rs[0])
	}
	// The retry carries either the set that failed or the newer one; the
	// newer one must reach the application either way, and on-start never
	// runs twice successfully.
	if rs[0].stdin != fqdn(0)+"\n"+fqdn(1)+"\n" {
		rs = waitRuns(t, dir, 2)
		if rs[1].name != "on-change" || rs[1].stdin != fqdn(0)+"\n"+fqdn(1)+"\n" {
			t.Fatalf("runs = %+v", rs)
		}
	}
}

func TestUsageErrorsExitTwoNamingTheFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		flag string
	}{
		{[]string{"-service=web", "-ns=a", "-domain=x"}, "-on-start"},
		{[]string{"-on-start=/bin/true", "-ns=a", "-domain=x"}, "-service"},
		{[]string{"-on-start=/bin/true", "-service=web", "-domain=x", "-dns-server=127.0.0.1:53", "-poll-period=fast"}, "-poll-period"},
		// issue 36 #20: given twice, a single-value flag kept the last value.
		{[]string{"-on-change=/bin/true", "-on-change=/bin/false", "-service=web", "-ns=a", "-domain=x", "-dns-server=127.0.0.1:53"}, "-on-change: given twice"},
		{[]string{"-on-change=/bin/true", "-hook-timeout=1ns", "-service=web", "-ns=a", "-domain=x", "-dns-server=127.0.0.1:53"}, "-hook-timeout"},
		// issue 32 #1: the names of the pods of this pod's Jobs need the pods source.
		{[]string{"-service=web", "-ns=a", "-domain=x", "-hosts-file=h", "-hosts-expect=auto"}, "-hosts-expect: auto needs -source=pods"},
		{[]string{"-service=web", "-ns=a", "-domain=x", "-hosts-file=h", "-hosts-expect=ps=1", "-hosts-job-label=app"}, "-hosts-job-label"},
		{[]string{"-on-change=/bin/true", "-service=web", "-ns=a", "-domain=" + strings.Repeat("d", 60) + "." + strings.Repeat("d", 60) + "." + strings.Repeat("d", 60) + "." + strings.Repeat("d", 60), "-dns-server=127.0.0.1:53"}, "-domain"},
	} {
		cmd := exec.Command(binary, tt.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if pfbinary.ExitStatus(cmd.ProcessState) != 2 || !strings.Contains(stderr.String(), tt.flag) {
			t.Errorf("%v: status %d (%v), stderr %q; want 2 naming %s", tt.args, pfbinary.ExitStatus(cmd.ProcessState), err, stderr.String(), tt.flag)
		}
	}
}

// TestFailedOnChangeThenRevertedSetRunsAgain: set A (3 peers) succeeds; set
// B (4 peers) makes on-change reconfigure the application and then exit 1;
// DNS goes back to A. on-change runs for A, as upstream runs it for every
// change of names (issue 36 #2: it was skipped as equal to the last success
// while peer-finder logged "sink recovered", and the application stayed
// configured for 4).
func TestFailedOnChangeThenRevertedSetRunsAgain(t *testing.T) {
	dns := dnstest.New(t)
	a := []dnstest.SRVRecord{{Target: fqdn(0), Port: 80}, {Target: fqdn(1), Port: 80}, {Target: fqdn(2), Port: 80}}
	dns.SetSRV(svc, a...)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	// Each run appends the size it configured the application for; 4 fails.
	script := filepath.Join(dir, "on-change.sh")
	body := "#!/bin/sh\nn=$(grep -c .)\necho $n >> " + runs + "\n[ $n -ne 4 ]\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	p := start(t, append(common(dns.Addr()), "-trailing-newline", "-on-change="+script)...)
	configured := func(want string) {
		t.Helper()
		waitFile(t, runs, func(s string) bool { return strings.HasPrefix(s, want) })
	}
	configured("3\n")
	dns.SetSRV(svc, append(a, dnstest.SRVRecord{Target: fqdn(3), Port: 80})...)
	configured("3\n4\n")
	dns.SetSRV(svc, a...) // before the retry: it gets A
	waitFile(t, runs, func(s string) bool { return strings.HasSuffix(s, "4\n3\n") })
	// The recovery is logged after the run that configured A, not instead.
	await.Until(t, func() bool { return len(p.Find("sink recovered")) > 0 }, "a \"sink recovered\" record")
	msgs := logtest.Messages(p.Logs())
	failed := len(msgs) - 1
	for failed >= 0 && msgs[failed] != "sink failing" {
		failed--
	}
	after := msgs[failed+1:] // since the last failure
	if ran, recovered := slices.Index(after, "hook ran"), slices.Index(after, "sink recovered"); failed < 0 || ran < 0 || ran > recovered {
		t.Errorf("'sink recovered' without a run of on-change since it failed: %q", msgs)
	}
}
