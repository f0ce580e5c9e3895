package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/localcluster/apps"
	flockbootstrap "github.com/flockd/flock/peerfinder/bootstrap"
)

// galeraSet is a Galera StatefulSet of an example: its name and how the
// mariadb client runs in its pods.
type galeraSet struct {
	name   string
	client apps.GaleraClient
}

var (
	// galeraExample is examples/apps/galera: mariadb as the container's user.
	galeraExample = galeraSet{"galera", apps.GaleraClient{Container: apps.GaleraContainer}}
	// galeraUpstream is its upstream shape: root without a password, as
	// Kubernetes' e2e manifest's probe connects.
	galeraUpstream = galeraSet{"mysql", apps.GaleraClient{Container: "mysql", User: "root"}}
)

// waitGalera waits until the n pods of g are one Galera cluster, by
// mariadb in each pod: one cluster state uuid, wsrep_cluster_size n, every
// member Synced in the primary component; it returns the uuid and fails at
// once on a second cluster.
func (b *bed) waitGalera(g galeraSet, n int, timeout time.Duration) string {
	b.t.Helper()
	ex := apps.NewExec(b.Config, b.Client)
	pods := b.podNames(g.name, n)
	var uuid string
	b.waitApp(fmt.Sprintf("one Galera cluster of %d", n), timeout, 2*time.Second, func() { b.dumpGalera(g, n+2) }, func() error {
		v := apps.JudgeGalera(apps.ReadGaleraAll(context.Background(), ex, b.ns, pods, g.client), pods)
		if v.Split() {
			b.t.Fatalf("two clusters: %s", v.Detail)
		}
		if !v.Healthy {
			return errors.New(v.Detail)
		}
		uuid = v.UUID()
		return nil
	})
	return uuid
}

// dumpGalera logs the last lines of the containers' logs of g's first n
// pods (mariadbd's own log is long).
func (b *bed) dumpGalera(g galeraSet, n int) {
	pods := b.podNames(g.name, n)
	b.dumpContainers(pods, 80, "bootstrap", g.client.Container)
	b.galeraStory(pods, g.client.Container)
}

// joinedAddresses matches run.sh's line for a joiner, with the addresses
// its names resolved to.
var joinedAddresses = regexp.MustCompile(`joining gcomm://\S+ \(\d+\.\d+\.\d+\.\d+( \d+\.\d+\.\d+\.\d+)*\)`)

// storyLine matches what run.sh logs (a time, then words) and peer-finder's
// decisions, among mariadbd's own lines (which start with a date).
var storyLine = regexp.MustCompile(`^\d\d:\d\d:\d\d |msg="(bootstrap role|awaiting ranks|rank|rank command failed[^"]*|recording the member with the highest rank as the former|adopting the cluster record)"`)

// galeraStory logs, last (so that a cut log keeps it), what each pod's
// container was told and did in its previous and current runs, and the
// pods' warning events (liveness probe failures, back-off).
func (b *bed) galeraStory(pods []string, container string) {
	var story strings.Builder
	for _, p := range pods {
		for _, prev := range []bool{true, false} {
			raw, err := b.Client.CoreV1().Pods(b.ns).GetLogs(p, &corev1.PodLogOptions{Container: container, Previous: prev}).DoRaw(context.Background())
			if err != nil {
				continue
			}
			fmt.Fprintf(&story, "%s/%s (previous %v):\n", p, container, prev)
			for _, line := range strings.Split(string(raw), "\n") {
				if storyLine.MatchString(line) {
					fmt.Fprintf(&story, "  %s\n", line)
				}
			}
		}
	}
	if evs, err := b.Client.CoreV1().Events(b.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "type=Warning"}); err == nil {
		for _, e := range evs.Items {
			fmt.Fprintf(&story, "event %s %s %s x%d: %s\n", e.LastTimestamp.UTC().Format("15:04:05"), e.InvolvedObject.Name, e.Reason, e.Count, strings.TrimSpace(e.Message))
		}
	}
	b.t.Logf("--- the story (run.sh and peer-finder in %s, warning events):\n%s", container, story.String())
}

// sql runs statements with mariadb -NB in pod of g (in the example as the
// container's user: socket authentication, no password) and returns the
// output.
func (b *bed) sql(g galeraSet, pod, stmts string) string {
	b.t.Helper()
	out, err := b.exec(pod, g.client.Container, g.client.Command(stmts)...)
	if err != nil {
		b.t.Fatalf("%s: mariadb -e %q: %v: %s", pod, stmts, err, out)
	}
	return strings.TrimSpace(out)
}

// acked writes n rows through pod, one transaction each, tagged with tag,
// and returns how many were acknowledged (mariadb exited 0): all of them,
// or the test fails.
func (b *bed) acked(pod, tag string, n int) int {
	b.t.Helper()
	for i := range n {
		b.sql(galeraExample, pod, fmt.Sprintf("INSERT INTO flock.acked (tag) VALUES ('%s-%d')", tag, i))
	}
	return n
}

// checkRows fails unless every pod holds exactly want acknowledged rows.
func (b *bed) checkRows(pods []string, want int) {
	b.t.Helper()
	for _, p := range pods {
		if got := b.sql(galeraExample, p, "SELECT COUNT(*) FROM flock.acked"); got != strconv.Itoa(want) {
			b.t.Errorf("%s: %s acknowledged rows, want %d", p, got, want)
		}
	}
}

// stopPod deletes pod (the StatefulSet was deleted, so nothing re-creates
// it) and waits until it is gone: mariadbd shut down and wrote its seqno.
func (b *bed) stopPod(name string) {
	b.t.Helper()
	b.deleteAndWait(name, metav1.DeleteOptions{})
}

// TestAppGalera applies examples/apps/galera as written and checks, with
// mariadb in each pod (as the container's user, no password): three
// members form one cluster; scaled to 5 and back to 3 it stays that
// cluster; a member cut off from its peers' addresses is restarted by
// its liveness probe and joins again; a member's pod and claim deleted, it
// rejoins by a state snapshot transfer with every row. Then the full restart after writes
// that reached only some members: the StatefulSet deleted (its pods kept),
// the pods stopped one by one with acknowledged writes between (galera-0,
// then galera-2, galera-1 last, so galera-1 alone has the newest data,
// neither the lowest nor the highest ordinal), the StatefulSet created
// again from the same file: the ranks (seqnos) go into the Lease, galera-1
// forms from its data, the others join it, and every acknowledged row is on
// every member. Last, Kubernetes' e2e restart (scaled to 0 and back: every
// member stops at once).
func TestAppGalera(t *testing.T) {
	t.Parallel() // its own namespace
	b := newBed(t)
	b.applyKustomization("examples/apps/galera")
	start := time.Now()
	uuid := b.waitGalera(galeraExample, 3, 5*time.Minute)
	t.Logf("one cluster of 3 after %s: %s", time.Since(start).Round(time.Second), uuid)
	if log := b.logs("galera-0", "mariadb", false); !strings.Contains(log, "forming a new cluster") {
		t.Errorf("galera-0 did not form:\n%s", log)
	}
	// run.sh records the addresses a joiner's mariadbd starts with
	// (resolveip, in the image), for alive.sh.
	if log := b.logs("galera-1", "mariadb", false); !joinedAddresses.MatchString(log) {
		t.Errorf("galera-1 did not join with the members' addresses resolved:\n%s", log)
	}
	if user := b.sql(galeraExample, "galera-0", "SELECT USER()"); user != "flock@localhost" {
		t.Errorf("mariadb as the container's user is %q, want flock@localhost", user)
	}
	b.socketReadsAgree(b.podNames("galera", 3))
	b.sql(galeraExample, "galera-0", "CREATE DATABASE flock; CREATE TABLE flock.acked (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(64) NOT NULL)")
	rows := b.acked("galera-0", "formed", 5)

	b.scale("galera", 5)
	if got := b.waitGalera(galeraExample, 5, 5*time.Minute); got != uuid {
		t.Fatalf("scaled to 5: cluster %s, want %s", got, uuid)
	}
	rows += b.acked("galera-4", "five", 5)
	b.scale("galera", 3)
	b.waitPods("app=galera", 3)
	if got := b.waitGalera(galeraExample, 3, 3*time.Minute); got != uuid {
		t.Fatalf("scaled back to 3: cluster %s, want %s", got, uuid)
	}
	b.checkRows(b.podNames("galera", 3), rows)

	b.cutOffRejoins("galera-1", uuid)
	b.checkRows(b.podNames("galera", 3), rows)
	b.formerCrashRejoins(uuid)
	b.checkRows(b.podNames("galera", 3), rows)
	b.crashInPlaceRestores(uuid)
	b.checkRows(b.podNames("galera", 3), rows)
	b.stopInPlaceRanksDecide(uuid)
	b.checkRows(b.podNames("galera", 3), rows)

	b.deletePod("galera-2", "data-galera-2")
	if got := b.waitGalera(galeraExample, 3, 5*time.Minute); got != uuid {
		t.Fatalf("galera-2 re-created without its data: cluster %s, want %s", got, uuid)
	}
	if log := b.logs("galera-2", "mariadb", false); !strings.Contains(log, "no data: mariadb-install-db") || !strings.Contains(log, "SST succeeded") {
		t.Errorf("galera-2 did not rejoin by a state snapshot transfer:\n%s", log)
	}
	b.checkRows(b.podNames("galera", 3), rows)

	rows = b.fullRestartNewestForms(uuid, rows)

	// Kubernetes' e2e sequence: a row through member 0, the StatefulSet
	// scaled to 0 (Parallel: every member stops at once) and back to 3,
	// the row read on member 2.
	b.sql(galeraExample, "galera-0", `INSERT INTO flock.acked (tag) VALUES ("foo")`)
	gone := b.restartSet("galera", "app=galera", 3)
	back := time.Now()
	if got := b.waitGalera(galeraExample, 3, 6*time.Minute); got != uuid {
		t.Fatalf("scaled to 0 and back to 3: cluster %s, want %s", got, uuid)
	}
	t.Logf("e2e restart: pods gone after %s, one cluster of 3 again after %s more", gone.Round(time.Second), time.Since(back).Round(time.Second))
	if got := b.sql(galeraExample, "galera-2", `SELECT COUNT(*) FROM flock.acked WHERE tag = "foo"`); got != "1" {
		t.Errorf("galera-2 has %s rows foo, want 1 (written through galera-0 before the restart)", got)
	}
	rows += 1 + b.acked("galera-2", "before-crash", 3)

	b.crashRestartKeepsCluster(uuid, rows)
}

// socketReadsAgree: the campaign's poll, each member's wsrep status read
// over its socket from this machine (apps.ReadGaleraSocket, as root by
// socket authentication), says what mariadb in an exec says, on a formed
// cluster whose status holds still.
func (b *bed) socketReadsAgree(pods []string) {
	b.t.Helper()
	ctx := context.Background()
	list, err := b.Client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=galera"})
	if err != nil {
		b.t.Fatal(err)
	}
	ids := apps.ContainerIDs(list.Items)
	ex := apps.NewExec(b.Config, b.Client)
	for _, pod := range pods {
		root, err := apps.ContainerRoot(ids[pod][apps.GaleraContainer])
		if err != nil {
			b.t.Fatalf("%s: %v", pod, err)
		}
		got := apps.ReadGaleraSocket(ctx, pod, root)
		want := apps.ReadGalera(ctx, ex, b.ns, pod, galeraExample.client)
		got.LastCommitted, want.LastCommitted = 0, 0 // the only one that moves meanwhile
		if !reflect.DeepEqual(got, want) || got.Err != "" || got.Status != "Primary" {
			b.t.Errorf("%s over its socket: %+v; mariadb in an exec: %+v", pod, got, want)
		}
		// The oracle tells two components of one history apart by their
		// members' addresses, which holds while each member lists itself.
		// (A list can lag the view by its newest joiners: read right after
		// the cluster reached 3, galera-1 listed 2.)
		ip := ""
		for _, p := range list.Items {
			if p.Name == pod {
				ip = p.Status.PodIP
			}
		}
		if ip == "" || !slices.ContainsFunc(got.Members, func(m string) bool { return strings.HasPrefix(m, ip+":") }) {
			b.t.Errorf("%s: wsrep_incoming_addresses %q, want its own address %s among them", pod, got.Members, ip)
		}
	}
}

// cutOffRejoins points pod's mariadbd at an address no member has
// (wsrep_cluster_address set to TEST-NET-1), as when every peer it knew
// came back with a new address (Galera resolves the gcomm:// names once):
// it leaves the primary component and retries that address. The liveness
// probe (alive.sh) must restart its container after 60 s outside the
// primary component, and run.sh join the members there are now.
func (b *bed) cutOffRejoins(pod, uuid string) {
	b.t.Helper()
	ex := apps.NewExec(b.Config, b.Client)
	before, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	restarts := int32(0)
	if s := status(before, apps.GaleraContainer); s != nil {
		restarts = s.RestartCount // its joins may have restarted it already
	}
	go func() { // blocks while gcomm tries the address; its error is expected
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = ex(ctx, b.ns, pod, apps.GaleraContainer, galeraExample.client.Command("SET GLOBAL wsrep_cluster_address='gcomm://192.0.2.1'")...)
	}()
	start := time.Now()
	b.WaitFor(b.t, pod+" outside the primary component", time.Minute, func(ctx context.Context) (bool, error) {
		v := apps.ReadGalera(ctx, ex, b.ns, pod, galeraExample.client)
		return v.Err == "" && v.Status != "Primary", nil
	})
	b.waitPod(pod, "its mariadb container restarted by the liveness probe", 4*time.Minute, func(p *corev1.Pod) bool {
		s := status(p, apps.GaleraContainer)
		return s != nil && s.RestartCount > restarts
	})
	restarted := time.Since(start)
	if got := b.waitGalera(galeraExample, 3, 5*time.Minute); got != uuid {
		b.t.Fatalf("%s cut off and restarted: cluster %s, want %s", pod, got, uuid)
	}
	b.t.Logf("%s cut off: restarted by its liveness probe after %s, one cluster of 3 again after %s", pod,
		restarted.Round(time.Second), time.Since(start).Round(time.Second))
}

// formerCrashRejoins kills galera-0's mariadbd (galera-0 formed the
// cluster) with SIGKILL: its container restarts in the same pod, and
// run.sh, whose role was used, asks peer-finder again. galera-1 and
// galera-2 run, so galera-0 is told join and catches up.
func (b *bed) formerCrashRejoins(uuid string) {
	b.t.Helper()
	start := b.crashInPlace("galera-0")
	if got := b.waitGalera(galeraExample, 3, 5*time.Minute); got != uuid {
		b.t.Fatalf("galera-0 crashed in place: cluster %s, want %s", got, uuid)
	}
	b.t.Logf("galera-0 crashed in place: one cluster of 3 again after %s", time.Since(start).Round(time.Second))
	log := b.logs("galera-0", apps.GaleraContainer, false)
	for _, want := range []string{"asking peer-finder for the role again", "reason=member-running", "joining gcomm://"} {
		if !strings.Contains(log, want) {
			b.t.Errorf("galera-0's restarted mariadb container did not log %q:\n%s", want, log)
		}
	}
}

// crashInPlaceRestores kills every member's mariadbd with SIGKILL, the
// pods kept (as a power loss of every node short enough that no pod is
// replaced): each container restarts in its pod and asks peer-finder
// again. No member is Ready, so each withdraws its running mark and the
// ranks (the positions InnoDB recovers) decide: exactly one member forms
// from its recovered position, keeping the cluster's uuid, and the others,
// with the view of the primary component they crashed in, start at once
// and join it.
func (b *bed) crashInPlaceRestores(uuid string) {
	b.t.Helper()
	pods := b.podNames("galera", 3)
	start := b.crashInPlace(pods...)
	if got := b.waitGalera(galeraExample, 3, 5*time.Minute); got != uuid {
		b.t.Fatalf("every member crashed in place: cluster %s, want %s", got, uuid)
	}
	b.t.Logf("every member crashed in place: one cluster of 3 again after %s", time.Since(start).Round(time.Second))
	formed := 0
	for _, p := range pods {
		log := b.logs(p, apps.GaleraContainer, false)
		if strings.Contains(log, "confirming it runs") {
			// A container restarted while another member's pod still
			// showed Ready (peer-finder's RunningSettle).
			b.t.Logf("%s confirmed a Ready member runs before joining it", p)
		}
		switch {
		case strings.Contains(log, "forming a new cluster from this member's data"):
			formed++
		case !strings.Contains(log, "crashed in a primary component: starting at once"):
			b.t.Errorf("%s neither formed nor started at once with its view of the primary component:\n%s", p, log)
		}
	}
	if formed != 1 {
		b.t.Errorf("%d members formed from their data; want 1", formed)
	}
}

// stopInPlaceRanksDecide stops every member's mariadbd cleanly (SIGTERM)
// at once, the pods kept, as a cluster that lost its primary component in
// place and whose liveness probes restarted every member (galera-4's round
// 35): a clean stop removes gvwstate.dat, so Galera restores nothing, and
// every member had been Ready since it was told its role. Each container
// restarts in its pod and asks peer-finder again, withdrawing its running
// mark; the ranks decide, exactly one member forms from its data, and the
// cluster keeps its state uuid. Before, each was told join and none formed.
func (b *bed) stopInPlaceRanksDecide(uuid string) {
	b.t.Helper()
	pods := b.podNames("galera", 3)
	start := b.stopInPlace(syscall.SIGTERM, pods...)
	if got := b.waitGalera(galeraExample, 3, 6*time.Minute); got != uuid {
		b.t.Fatalf("every member stopped in place: cluster %s, want %s", got, uuid)
	}
	b.t.Logf("every member stopped in place: one cluster of 3 again after %s", time.Since(start).Round(time.Second))
	formed, decided := 0, 0
	for _, p := range pods {
		if pod, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), p, metav1.GetOptions{}); err == nil {
			if s := status(pod, apps.GaleraContainer); s != nil && s.State.Running != nil {
				b.t.Logf("%s: mariadb container started again %s after the stop (restart %d)", p, s.State.Running.StartedAt.Sub(start).Round(time.Second), s.RestartCount)
			}
		}
		log := b.logs(p, apps.GaleraContainer, false)
		if !strings.Contains(log, "asking peer-finder for the role again") {
			b.t.Errorf("%s's restarted mariadb container did not ask again:\n%s", p, log)
		}
		formed += strings.Count(log, "forming a new cluster from this member's data")
		decided += strings.Count(log, "recording the member with the highest rank as the former")
	}
	if formed != 1 || decided < 1 {
		b.t.Errorf("%d members formed (want 1), %d recorded a rank decision (want at least 1)", formed, decided)
	}
}

// crashInPlace kills the mariadbd of pods with SIGKILL and waits until
// each pod's mariadb container restarted in place; it returns when it
// killed them.
func (b *bed) crashInPlace(pods ...string) time.Time {
	b.t.Helper()
	return b.stopInPlace(syscall.SIGKILL, pods...)
}

// stopInPlace sends sig to the mariadbd of pods and waits until each pod's
// mariadb container restarted in place; it returns when it signalled them.
func (b *bed) stopInPlace(sig syscall.Signal, pods ...string) time.Time {
	b.t.Helper()
	restarts := map[string]int32{}
	for _, p := range pods {
		pod, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), p, metav1.GetOptions{})
		if err != nil {
			b.t.Fatal(err)
		}
		if s := status(pod, apps.GaleraContainer); s != nil {
			restarts[p] = s.RestartCount
		}
	}
	for _, p := range pods {
		b.signalInPod(p, "mariadbd", sig)
	}
	start := time.Now()
	for _, p := range pods {
		b.waitPod(p, "its mariadb container restarted", 2*time.Minute, func(pod *corev1.Pod) bool {
			s := status(pod, apps.GaleraContainer)
			return s != nil && s.RestartCount > restarts[p]
		})
	}
	return start
}

// orphanSet deletes the StatefulSet name, its pods kept, so that nothing
// re-creates the pods a test stops.
func (b *bed) orphanSet(name string) {
	b.t.Helper()
	orphan := metav1.DeletePropagationOrphan
	if err := b.Client.AppsV1().StatefulSets(b.ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		b.t.Fatal(err)
	}
	b.WaitFor(b.t, "the StatefulSet "+name+" gone", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := b.Client.AppsV1().StatefulSets(b.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// crashRestartKeepsCluster crashes every member of the formed galera
// cluster of 3 (mariadbd killed with SIGKILL from the host: grastate.dat
// keeps seqno -1), deletes their pods and creates the StatefulSet again:
// the ranks are the positions InnoDB recovers, and the member that forms
// starts from its recovered position, so the cluster keeps its state uuid
// (without it, Galera starts a new history) and every row.
func (b *bed) crashRestartKeepsCluster(uuid string, rows int) {
	b.t.Helper()
	pods := b.podNames("galera", 3)
	b.orphanSet("galera")
	for _, p := range pods {
		b.killInPod(p, "mariadbd")
	}
	for _, p := range pods {
		b.deleteAndWait(p, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}
	b.apply(repoFile(b.t, "examples/apps/galera/statefulset.yaml"), b.forRealNode)
	start := time.Now()
	if got := b.waitGalera(galeraExample, 3, 6*time.Minute); got != uuid {
		b.t.Fatalf("after every member crashed: cluster %s, want %s (the same history)", got, uuid)
	}
	b.t.Logf("every member crashed: one cluster of 3 again after %s", time.Since(start).Round(time.Second))
	formed := false
	for _, p := range pods {
		if log := b.logs(p, "mariadb", false); strings.Contains(log, "forming a new cluster from this member's data") {
			formed = true
			if !strings.Contains(log, "recovered position "+uuid+":") {
				b.t.Errorf("%s formed without its recovered position:\n%s", p, log)
			}
		}
	}
	if !formed {
		b.t.Errorf("no member formed from its data")
	}
	b.checkRows(pods, rows)
}

// claimFile is the path on this machine of file in the volume of claim,
// which pod (running) mounts.
func (b *bed) claimFile(pod, claim, file string) string {
	b.t.Helper()
	ctx := context.Background()
	p, err := b.Client.CoreV1().Pods(b.ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	pvc, err := b.Client.CoreV1().PersistentVolumeClaims(b.ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	pv, err := b.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.HostPath == nil {
		b.t.Fatalf("volume of claim %s: %v (%+v)", claim, err, pv)
	}
	return filepath.Join(b.realNode(p.Spec.NodeName).HostPath(pv.Spec.HostPath.Path), file)
}

// fullRestartNewestForms stops the members of the formed galera cluster of
// 3 one by one with acknowledged writes between, galera-1 last, and starts
// them all again, galera-0's rank command failing at first: galera-1, with
// the highest seqno, must form. It returns the acknowledged rows, with the
// ones it wrote.
func (b *bed) fullRestartNewestForms(uuid string, rows int) int {
	b.t.Helper()
	ctx := context.Background()
	b.orphanSet("galera")
	grastate := b.claimFile("galera-0", "data-galera-0", "grastate.dat")
	b.stopPod("galera-0")
	rows += b.acked("galera-1", "without-0", 3)
	b.stopPod("galera-2")
	rows += b.acked("galera-1", "galera-1-alone", 3)
	b.stopPod("galera-1")

	// galera-0's rank command fails (its grastate.dat's seqno is no
	// number) until the file is put back: the others wait for it, naming
	// the failure, and do not decide without it.
	saved, err := os.ReadFile(grastate)
	if err != nil {
		b.t.Fatal(err)
	}
	broken := regexp.MustCompile(`(?m)^seqno:.*$`).ReplaceAll(saved, []byte("seqno:   unreadable"))
	if err := os.WriteFile(grastate, broken, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.apply(repoFile(b.t, "examples/apps/galera/statefulset.yaml"), b.forRealNode)
	start := time.Now()
	b.waitLog("galera-0", "bootstrap", "rank command failed; this member counts as missing", 3*time.Minute)
	b.waitLog("galera-1", "bootstrap", "rank command failed in galera-0", 3*time.Minute)
	if err := os.WriteFile(grastate, saved, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("galera-0's rank command failed, named by galera-1; its grastate.dat put back after %s", time.Since(start).Round(time.Second))
	if got := b.waitGalera(galeraExample, 3, 6*time.Minute); got != uuid {
		b.t.Fatalf("after the full restart: cluster %s, want %s", got, uuid)
	}
	b.t.Logf("full restart: one cluster of 3 again after %s", time.Since(start).Round(time.Second))
	l, err := b.Client.CoordinationV1().Leases(b.ns).Get(ctx, "galera-cluster", metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	if got, want := l.Annotations[flockbootstrap.AnnotationMember], b.fqdn("galera-1", "galera"); got != want {
		b.t.Errorf("the Lease records %q as the former, want %s (the newest data)", got, want)
	}
	ranks := map[string]int64{}
	for _, p := range b.podNames("galera", 3) {
		var e flockbootstrap.Rank
		if err := json.Unmarshal([]byte(l.Annotations[flockbootstrap.AnnotationRankPrefix+p]), &e); err != nil {
			b.t.Errorf("%s's rank in the Lease: %v", p, err)
		}
		ranks[p] = e.Value
	}
	b.t.Logf("ranks (seqnos) in the Lease: %v", ranks)
	if !(ranks["galera-1"] > ranks["galera-2"] && ranks["galera-2"] > ranks["galera-0"]) {
		b.t.Errorf("ranks %v, want galera-1 > galera-2 > galera-0 (the order they stopped in, writes between)", ranks)
	}
	if log := b.logs("galera-1", "mariadb", false); !strings.Contains(log, "forming a new cluster from this member's data") {
		b.t.Errorf("galera-1 did not form from its data:\n%s", log)
	}
	for _, p := range []string{"galera-0", "galera-2"} {
		if log := b.logs(p, "mariadb", false); !strings.Contains(log, "joining gcomm://"+b.fqdn("galera-1", "galera")) {
			b.t.Errorf("%s did not join galera-1:\n%s", p, log)
		}
	}
	b.checkRows(b.podNames("galera", 3), rows)
	return rows
}

// TestAppGaleraUpstreamShape applies examples/apps/galera/upstream-shape
// (Kubernetes' mysql-galera e2e manifest: install copies peer-finder and
// on-start.sh into /work-dir, bootstrap runs /work-dir/peer-finder
// -on-start="/work-dir/on-start.sh" -service=galera with the quotes in the
// argument, OrderedReady) twice, each in its own namespace. With flock's
// binary on-start.sh runs, mysql-0 forms and the others join: one cluster
// of 3; then Kubernetes' e2e sequence (a row written through mysql-0, the
// StatefulSet scaled to 0 and back to 3, the row read on mysql-2). With
// upstream's binary in the same manifest, peer-finder execs the name with
// its quotes, runs nothing and fails: mysql-0 never starts MariaDB, and
// under OrderedReady no other member is created.
func TestAppGaleraUpstreamShape(t *testing.T) {
	t.Parallel()
	const dir = "examples/apps/galera/upstream-shape"
	t.Run("flock", func(t *testing.T) {
		t.Parallel()
		b := newBed(t)
		b.applyDirWith(dir, nil)
		start := time.Now()
		b.waitGalera(galeraUpstream, 3, 8*time.Minute)
		t.Logf("one cluster of 3 after %s", time.Since(start).Round(time.Second))
		if log := b.logs("mysql-0", "bootstrap", false); !strings.Contains(log, "hook ran") || !strings.Contains(log, "cluster address gcomm://\"") {
			t.Errorf("mysql-0's peer-finder did not run on-start.sh, or it did not form alone:\n%s", log)
		}
		// Kubernetes' e2e sequence for mysql-galera.
		b.sql(galeraUpstream, "mysql-0", `CREATE DATABASE statefulset; CREATE TABLE statefulset.foo (k VARCHAR(20), v VARCHAR(20)); INSERT INTO statefulset.foo (k, v) VALUES ("foo", "bar")`)
		gone := b.restartSet("mysql", "app=mysql", 3)
		back := time.Now()
		b.waitGalera(galeraUpstream, 3, 8*time.Minute)
		t.Logf("e2e restart: pods gone after %s, one cluster of 3 again after %s more", gone.Round(time.Second), time.Since(back).Round(time.Second))
		if got := b.sql(galeraUpstream, "mysql-2", `SELECT v FROM statefulset.foo WHERE k = "foo"`); got != "bar" {
			t.Errorf("mysql-2 reads %q, want bar (written through mysql-0 before the restart)", got)
		}
	})
	t.Run("upstream", func(t *testing.T) {
		t.Parallel()
		b := newBed(t)
		b.applyDirWith(dir, upstreamInstall(t))
		b.waitPod("mysql-0", "bootstrap restarted twice", 4*time.Minute, func(p *corev1.Pod) bool {
			s := status(p, "bootstrap")
			return s != nil && s.RestartCount >= 2
		})
		var log string
		b.WaitFor(t, "upstream's peer-finder in mysql-0's bootstrap (previous run) tried the quoted name", time.Minute, func(context.Context) (bool, error) {
			log = b.logs("mysql-0", "bootstrap", true)
			return strings.Contains(log, `execing: "/work-dir/on-start.sh"`), nil
		})
		if strings.Contains(log, "on-start:") {
			t.Errorf("on-start.sh ran under upstream's binary:\n%s", log)
		}
		p, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), "mysql-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s := status(p, "mysql"); s != nil && (s.State.Running != nil || s.RestartCount > 0) {
			t.Errorf("mysql-0's mysql started: %+v", s)
		}
		if _, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), "mysql-1", metav1.GetOptions{}); err == nil {
			t.Errorf("mysql-1 exists: OrderedReady created it after a mysql-0 that never started")
		}
	})
}
