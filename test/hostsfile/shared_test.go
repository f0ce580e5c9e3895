package hostsfile

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/testing/fixture"
	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/localcluster/clustertest"
)

// reader parses a file continuously, as the pods sharing it do, and keeps
// every distinct content it saw.
type reader struct {
	path, id string
	stop     chan struct{}
	done     chan struct{}

	mu     sync.Mutex
	reads  int
	seen   map[string]int // content -> times read
	errors []string
}

func startReader(path, id string) *reader {
	r := &reader{path: path, id: id, stop: make(chan struct{}), done: make(chan struct{}), seen: map[string]int{}}
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			default:
			}
			content, err := os.ReadFile(path)
			r.mu.Lock()
			r.reads++
			if err != nil {
				r.errors = append(r.errors, err.Error())
			} else {
				r.seen[string(content)]++
			}
			r.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	return r
}

func (r *reader) finish() (reads int, seen map[string]int, errs []string) {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads, r.seen, r.errors
}

// TestSharedFileOneWriter: several peer-finders, one per pod, keep one hosts
// file shared by all of them (the octopus seed's NFS file) with
// -hosts-lease. Only the Lease holder writes, and puts its block back when
// the file is written anew; a reader parsing the file all
// the time never sees a partial block or foreign lines touched; when the
// writer is killed (no Lease release), another takes over and writes the
// newest set, including a change that happened while nobody led.
func TestSharedFileOneWriter(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	for _, f := range []string{"serviceaccount.yaml", "pods.yaml", "hosts-lease.yaml"} {
		load(t, "examples/rbac/"+f).apply(t, c, ns)
	}
	const lease = "hosts-writer" // the name examples/rbac/hosts-lease.yaml grants
	fixture.StatefulSet(t, c.Client, ns, 3, fixture.StatefulSetOptions{ServiceAccountName: "peer-finder"})
	pods := podsBy(t, c.Client, ns, "app=web", 3)

	shared := filepath.Join(t.TempDir(), "hosts")
	const outside = "# shared by every pod of web\n127.0.0.1\tlocalhost\n"
	if err := os.WriteFile(shared, []byte(outside), 0o644); err != nil {
		t.Fatal(err)
	}
	rd := startReader(shared, "web")
	kube := kubeconfigFor(t, c, ns, "peer-finder")
	procs := map[string]*proc{}
	run := func(pod string) {
		procs[pod] = start(t, pod, []string{
			"-kubeconfig=" + kube, "-domain=cluster.local", "-hostname=" + pod, "-service=web",
			"-source=pods", "-selector=app=web", "-hosts-file=" + shared, "-hosts-lease=" + lease, "-v",
		}, []string{"POD_NAME=" + pod, "POD_NAMESPACE=" + ns})
	}
	for _, p := range pods {
		run(p.Name)
	}
	ips := map[string][]string{} // every address each pod had
	want := map[string]string{}
	addPods := func(ps []corev1.Pod) {
		clear(want)
		for _, p := range ps {
			want[p.Name] = p.Status.PodIP
			if !slices.Contains(ips[p.Name], p.Status.PodIP) {
				ips[p.Name] = append(ips[p.Name], p.Status.PodIP)
			}
		}
	}
	addPods(pods)
	waitHosts(t, shared, "web", want)

	first := holder(t, c, ns, lease, "")
	checkOneWriter(t, procs, first, nil)

	// Someone writes the file anew (as the kubelet does a pod's /etc/hosts),
	// whole (a rename: the reader must never see it half written): the
	// holder puts its block back, nobody else writes.
	anew := shared + ".anew"
	if err := os.WriteFile(anew, []byte(outside), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(anew, shared); err != nil {
		t.Fatal(err)
	}
	waitHosts(t, shared, "web", want)
	eventually(t, first+" to log the restore", func() (bool, string) {
		return len(procs[first].Find(blockRestored)) > 0, "not logged yet"
	})
	checkOneWriter(t, procs, first, nil)

	// A fourth member and candidate joins.
	fixture.Scale(t, c.Client, ns, 4)
	addPods(podsBy(t, c.Client, ns, "app=web", 4))
	run("web-3")
	waitHosts(t, shared, "web", want)
	if h := holder(t, c, ns, lease, ""); h != first {
		t.Fatalf("the Lease moved from %s to %s without cause", first, h)
	}

	// The writer dies without releasing the Lease; the set changes while
	// nobody leads.
	procs[first].Kill()
	fixture.Scale(t, c.Client, ns, 5)
	addPods(podsBy(t, c.Client, ns, "app=web", 5))
	second := holder(t, c, ns, lease, first)
	// The Lease names the new holder a moment before it has written: wait
	// for its catch-up write (the old writer may already have written the
	// newest set before it died, so the file alone does not tell).
	eventually(t, second+" to catch up with the newest set on taking over", func() (bool, string) {
		return len(procs[second].Find("leader: newest set applied on taking over")) > 0, "not logged yet"
	})
	waitHosts(t, shared, "web", want)
	checkOneWriter(t, procs, second, []string{first})

	reads, seen, errs := rd.finish()
	if len(errs) > 0 {
		t.Errorf("reader errors: %v", errs)
	}
	if reads < 100 {
		t.Errorf("the reader read only %d times", reads)
	}
	for content, n := range seen {
		entries, rest, found, err := parseHosts([]byte(content), "web")
		switch {
		case err != nil:
			t.Errorf("read %d times: %v", n, err)
			continue
		case !found && content != outside:
			t.Errorf("read %d times: no block, and not the original file: %q", n, content)
		case rest != outside:
			t.Errorf("read %d times: lines outside the block changed to %q", n, rest)
		}
		for name, ip := range entries {
			if !slices.Contains(ips[name], ip) {
				t.Errorf("read %d times: %s -> %s, an address that pod never had (%v):\n%s", n, name, ip, ips[name], content)
			}
		}
	}
	t.Logf("reader: %d reads, %d distinct contents", reads, len(seen))
}

// holder waits until the Lease has a holder other than not and returns the
// pod name in its identity ("<pod>_<uuid>").
func holder(t *testing.T, c *clustertest.Cluster, ns, name, not string) string {
	t.Helper()
	var pod string
	eventually(t, "a Lease holder other than "+fmt.Sprintf("%q", not), func() (bool, string) {
		l, err := c.Client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.HolderIdentity == nil {
			return false, "no holder"
		}
		pod, _, _ = strings.Cut(*l.Spec.HolderIdentity, "_")
		return pod != "" && pod != not, *l.Spec.HolderIdentity
	})
	return pod
}

// blockRestored is the hosts file sink's record of a restore.
const blockRestored = "hosts file: block restored after the file was rewritten by someone else"

// checkOneWriter checks from the processes' logs that only the holder (and
// the earlier holders in was) ever led or wrote the file.
//
// The holder's lines are awaited: it logs a write after renaming the file
// into place, and its log reaches the test through a pipe, so the file the
// test waited for can be there before the line is.
func checkOneWriter(t *testing.T, procs map[string]*proc, holder string, was []string) {
	t.Helper()
	ledWrote := func(pod string) (bool, bool) {
		logs := procs[pod].Logs()
		return len(logtest.Find(logs, "leader: started leading")) > 0,
			len(logtest.Find(logs, "hosts file applied"))+len(logtest.Find(logs, blockRestored)) > 0
	}
	eventually(t, holder+", which holds the Lease, to log leading and a write", func() (bool, string) {
		led, wrote := ledWrote(holder)
		return led && wrote, fmt.Sprintf("led %v, wrote %v", led, wrote)
	})
	for _, pod := range slices.Sorted(maps.Keys(procs)) {
		if led, wrote := ledWrote(pod); pod != holder && !slices.Contains(was, pod) && (led || wrote) {
			t.Errorf("%s does not hold the Lease but led (%v) or wrote (%v)", pod, led, wrote)
		}
	}
}
