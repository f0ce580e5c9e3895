package hostsfile

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/localcluster/clustertest"
)

// TestPid1Example applies examples/hostsfile/pid1.yaml and runs each
// StatefulSet pod's container as the manifest says: peer-finder writes the
// peer list, starts the stand-in server from the ConfigMap only after that,
// sends it SIGHUP after a scale-up changed the list, forwards SIGTERM and
// exits with the server's status.
func TestPid1Example(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	m := load(t, "examples/hostsfile/pid1.yaml")
	m.apply(t, c, ns)
	ctr := container(t, m.podSpec(t, "cache"), "cache")

	pods := podsBy(t, c.Client, ns, "app=cache", 3)
	var procs []*proc
	for i := range pods {
		procs = append(procs, newPodRoot(t, c, m, &pods[i]).run(t, ctr))
	}
	// The server's first read already sees all three (it starts after the
	// first delivery), and each later change comes as a SIGHUP.
	for _, p := range procs {
		waitOutput(t, p, "reload: 3 peers\n")
	}
	scale := fmt.Sprintf(`{"spec":{"replicas":%d}}`, 4)
	if _, err := c.Client.AppsV1().StatefulSets(ns).Patch(t.Context(), "cache", "application/merge-patch+json", []byte(scale), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		waitOutput(t, p, "reload: 3 peers\nreload: 4 peers\n")
	}
	for _, p := range procs {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		if code := p.WaitWithin(t, wait); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want the server's 0", p.Name, code)
		}
		if !strings.HasSuffix(p.Stdout.String(), "stopping\n") {
			t.Errorf("%s: SIGTERM not forwarded to the server: %q", p.Name, p.Stdout.String())
		}
	}
}

// waitOutput waits until p's stdout, without the lines of later reloads'
// extra SIGHUPs, is want (each reload line once, in order).
func waitOutput(t *testing.T, p *proc, want string) {
	t.Helper()
	eventually(t, p.Name+" to print "+fmt.Sprintf("%q", want), func() (bool, string) {
		got := p.Stdout.String()
		return dedupLines(got) == want, got
	})
}

// dedupLines drops a line equal to the one before it: the server may be told
// to reload more than once for what ends as one list (pods becoming ready).
func dedupLines(s string) string {
	var out []string
	for line := range strings.Lines(s) {
		if len(out) == 0 || out[len(out)-1] != line {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
