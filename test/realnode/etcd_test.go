package realnode

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/internal/testing/logtest"
	"github.com/flockd/flock/localcluster/apps"
	flockbootstrap "github.com/flockd/flock/peerfinder/bootstrap"
)

// applyKustomization applies each resource of dir's kustomization.yaml, in
// order, as the real node needs them (forRealNode), and checks that kubectl
// renders the same directory when it is installed.
func (b *bed) applyKustomization(dir string) { b.applyKustomizationWith(dir, nil) }

// applyKustomizationWith is applyKustomization with edit applied to each
// object after forRealNode.
func (b *bed) applyKustomizationWith(dir string, edit func(*unstructured.Unstructured)) {
	b.t.Helper()
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(repoFile(b.t, dir+"/kustomization.yaml"), &k); err != nil {
		b.t.Fatal(err)
	}
	if len(k.Resources) == 0 {
		b.t.Fatalf("%s/kustomization.yaml lists no resources", dir)
	}
	if path, err := exec.LookPath("kubectl"); err == nil {
		if out, err := exec.Command(path, "kustomize", repoPath(b.t, dir)).CombinedOutput(); err != nil {
			b.t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
		}
	}
	for _, r := range k.Resources {
		b.apply(repoFile(b.t, dir+"/"+r), func(o *unstructured.Unstructured) {
			b.forRealNode(o)
			if edit != nil {
				edit(o)
			}
		})
	}
}

func (b *bed) podNames(prefix string, n int) []string {
	var pods []string
	for i := range n {
		pods = append(pods, fmt.Sprintf("%s-%d", prefix, i))
	}
	return pods
}

// waitEtcd waits until the n pods of the etcd StatefulSet form one healthy
// cluster whose members are exactly the pods, by etcdctl in each pod, and
// returns its cluster id. It fails at once on a second cluster id.
func (b *bed) waitEtcd(n int, timeout time.Duration) uint64 {
	b.t.Helper()
	ex := apps.NewExec(b.Config, b.Client)
	pods := b.podNames("etcd", n)
	var id uint64
	b.waitApp(fmt.Sprintf("a healthy %d-member etcd cluster", n), timeout, 2*time.Second, func() { b.dumpEtcd(n + 2) }, func() error {
		v := apps.JudgeEtcd(apps.ReadEtcdAll(context.Background(), ex, b.ns, pods), pods)
		if v.Split() {
			b.t.Fatalf("split brain: %s", v.Detail)
		}
		if !v.Healthy {
			return errors.New(v.Detail)
		}
		id = v.ClusterIDs[0]
		return nil
	})
	return id
}

// dumpEtcd logs the containers' logs of the first n pods.
func (b *bed) dumpEtcd(n int) {
	for _, p := range b.podNames("etcd", n) {
		for _, c := range []string{"bootstrap", "etcd", "peer-finder"} {
			for _, prev := range []bool{true, false} {
				raw, err := b.Client.CoreV1().Pods(b.ns).GetLogs(p, &corev1.PodLogOptions{Container: c, Previous: prev}).DoRaw(context.Background())
				if err == nil {
					b.t.Logf("--- %s/%s (previous %v):\n%s", p, c, prev, brief(string(raw)))
				}
			}
		}
	}
}

// brief keeps a log's lines that are not etcd's JSON and its last 5 lines.
func brief(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	var out []string
	for i, l := range lines {
		if !strings.HasPrefix(l, "{") || i >= len(lines)-5 || i < 25 {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// waitPods waits until n pods of selector exist.
func (b *bed) waitPods(selector string, n int) {
	b.t.Helper()
	b.WaitFor(b.t, fmt.Sprintf("%d pods %s", n, selector), 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := b.Client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(pods.Items) == n, err
	})
}

// deletePod deletes a pod and waits until the StatefulSet re-created it
// (another UID).
func (b *bed) deletePod(name string, alsoClaim string) {
	b.t.Helper()
	ctx := context.Background()
	old, err := b.Client.CoreV1().Pods(b.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	if alsoClaim != "" {
		if err := b.Client.CoreV1().PersistentVolumeClaims(b.ns).Delete(ctx, alsoClaim, metav1.DeleteOptions{}); err != nil {
			b.t.Fatal(err)
		}
	}
	if err := b.Client.CoreV1().Pods(b.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		b.t.Fatal(err)
	}
	b.waitPod(name, "re-created", 2*time.Minute, func(p *corev1.Pod) bool { return p.UID != old.UID })
}

// removedStaysOut removes pod's member from etcd by hand, as the sidecar of
// a remaining member does on scale-down, while pod keeps running, and checks
// that the member stays out: its etcd stops, its container is not restarted
// and does not add the member back. Restarted in place it would, and the
// kubelet can restart a container of a pod being deleted before it sees
// the deletion: a scaled-away member came back that way (CI, 2026-12-01).
func (b *bed) removedStaysOut(pod string) {
	b.t.Helper()
	if out, err := b.exec("etcd-0", "etcd", "sh", "-c", `id=$(etcdctl member list | awk -F', ' -v n="$1" '$3 == n {print $1}')
		[ -n "$id" ] && etcdctl member remove "$id"`, "sh", pod); err != nil {
		b.t.Fatalf("member remove %s: %v\n%s", pod, err, out)
	}
	b.waitLog(pod, "etcd", "not rejoining until the pod is re-created", time.Minute)
	p, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "etcd" && c.RestartCount != 0 {
			b.t.Errorf("%s's etcd container restarted %d times after its removal", pod, c.RestartCount)
		}
	}
	v := apps.ReadEtcd(context.Background(), apps.NewExec(b.Config, b.Client), b.ns, "etcd-0")
	if slices.Contains(v.Members, pod) || len(v.Members) == 0 {
		b.t.Errorf("after removing %s, etcd-0 sees members %q (%s)", pod, v.Members, v.Err)
	}
}

// TestAppEtcd applies examples/apps/etcd as written and checks, with
// etcdctl in each pod: three members form one healthy cluster; scaled to 5
// and back to 3 it stays one cluster whose members are the pods; a member
// removed from etcd stays out until its pod is re-created, then rejoins; a
// deleted member comes back into the same cluster; etcd-0 with its claim
// deleted (its data lost) rejoins the same cluster instead of forming a new
// one.
func TestAppEtcd(t *testing.T) {
	t.Parallel() // its own namespace; about a minute
	b := newBed(t)
	b.applyKustomization("examples/apps/etcd")
	start := time.Now()
	id := b.waitEtcd(3, 4*time.Minute)
	t.Logf("3 members healthy after %s, cluster id %x", time.Since(start).Round(time.Second), id)
	b.waitDeliveredEvent("etcd-0")
	step := func(what string) { t.Logf("%s: done at %s", what, time.Since(start).Round(time.Second)) }

	b.scale("etcd", 5)
	if got := b.waitEtcd(5, 4*time.Minute); got != id {
		t.Fatalf("scaled to 5: cluster id %x, want %x", got, id)
	}
	step("scaled to 5")
	b.scale("etcd", 3)
	b.waitPods("app=etcd", 3)
	if got := b.waitEtcd(3, 3*time.Minute); got != id {
		t.Fatalf("scaled back to 3: cluster id %x, want %x", got, id)
	}
	step("scaled back to 3")

	b.removedStaysOut("etcd-2")
	b.deletePod("etcd-2", "")
	if got := b.waitEtcd(3, 3*time.Minute); got != id {
		t.Fatalf("etcd-2 re-created after its removal: cluster id %x, want %x", got, id)
	}
	step("etcd-2 removed, stayed out, re-created")

	b.deletePod("etcd-1", "")
	if got := b.waitEtcd(3, 3*time.Minute); got != id {
		t.Fatalf("etcd-1 re-created: cluster id %x, want %x", got, id)
	}
	if log := b.logs("etcd-1", "etcd", false); !strings.Contains(log, "starting from the data on the volume") || strings.Contains(log, "no data") {
		t.Errorf("etcd-1 re-created did not start from its data:\n%s", brief(log))
	}
	step("etcd-1 re-created")

	b.deletePod("etcd-0", "data-etcd-0")
	if got := b.waitEtcd(3, 4*time.Minute); got != id {
		t.Fatalf("etcd-0 re-created without its data: cluster id %x, want %x", got, id)
	}
	step("etcd-0 re-created without its data")
	if log := b.logs("etcd-0", "etcd", false); !strings.Contains(log, "removing it") || !strings.Contains(log, "joining the cluster") {
		t.Errorf("etcd-0 did not rejoin by remove and add:\n%s", log)
	}

	// Kubernetes' e2e sequence: a key written through member 0, the
	// StatefulSet scaled to 0 and back to 3, the key read on member 2.
	if out, err := b.exec("etcd-0", "etcd", "etcdctl", "put", "foo", "bar"); err != nil {
		t.Fatalf("put foo through etcd-0: %v\n%s", err, out)
	}
	gone := b.restartSet("etcd", "app=etcd", 3)
	back := time.Now()
	if got := b.waitEtcd(3, 4*time.Minute); got != id {
		t.Fatalf("scaled to 0 and back to 3: cluster id %x, want %x", got, id)
	}
	t.Logf("e2e restart: pods gone after %s, cluster back after %s more", gone.Round(time.Second), time.Since(back).Round(time.Second))
	if out, err := b.exec("etcd-2", "etcd", "etcdctl", "get", "--print-value-only", "foo"); err != nil || strings.TrimSpace(out) != "bar" {
		t.Errorf("get foo on etcd-2 after the restart: %q (%v), want bar", out, err)
	}
	step("Kubernetes' e2e restart (scaled to 0 and back to 3)")
}

// TestAppEtcdFormerReplacedKeepsItsClaim: the pod that formed the cluster
// (recorded in the Lease) is replaced before etcd wrote anything, its claim
// kept: the member killed mid-bootstrap of the campaign. The test sets up
// that state: the claim data-etcd-0 exists (the StatefulSet adopts it) and
// the Lease names an earlier etcd-0 with that claim. The new etcd-0 must
// form, or no member could ever be joined (seen stuck before: every member
// told join).
func TestAppEtcdFormerReplacedKeepsItsClaim(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	ctx := context.Background()
	claim, err := b.Client.CoreV1().PersistentVolumeClaims(b.ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-etcd-0", Labels: map[string]string{"app": "etcd"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lease := &flockbootstrap.Lease{Leases: clientset.Wrap(b.Client).Leases, Namespace: b.ns, Name: "etcd-cluster"}
	former := flockbootstrap.Member{Pod: "etcd-0", UID: "uid-of-the-replaced-etcd-0", Claims: []flockbootstrap.Claim{{Name: claim.Name, UID: string(claim.UID)}}}
	if _, err := lease.Claim(ctx, flockbootstrap.Record{Pod: former.Pod, UID: former.UID, Members: []flockbootstrap.Member{former}}, ""); err != nil {
		t.Fatal(err)
	}
	b.applyKustomization("examples/apps/etcd")
	b.waitEtcd(3, 2*time.Minute)
	// The new etcd-0 adopted the record: it is now the pod that formed.
	pod, err := b.Client.CoreV1().Pods(b.ns).Get(ctx, "etcd-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := lease.Read(ctx)
	if err != nil || rec == nil || rec.UID != string(pod.UID) {
		t.Errorf("cluster record %+v (%v), want the new etcd-0 (uid %s) as the pod that formed", rec, err, pod.UID)
	}
	if log := b.logs("etcd-0", "bootstrap", false); len(logtest.Find(logtest.ParseText(log), "", "role", "form")) == 0 {
		t.Errorf("etcd-0 was not told form for its kept claim:\n%s", log)
	}
}

// TestAppEtcdUnstartedJoinerCostsNoQuorum: a member that etcd added but
// whose etcd never starts must not take the cluster's quorum. Campaign run
// 7, round 51: etcd-4 was added as a voter to a one-member cluster, its
// etcd was too slow to start, etcd-0 lost its quorum and nothing ever
// joined again. Here every pod but etcd-0 has a native sidecar holding the
// peer port 2380, so a joiner is added and its etcd cannot start; etcd-0
// must stay healthy. Then the port is freed: the joiner starts, is
// promoted, and the two members form one healthy cluster.
func TestAppEtcdUnstartedJoinerCostsNoQuorum(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	b.applyKustomizationWith("examples/apps/etcd", func(o *unstructured.Unstructured) {
		if o.GetKind() != "StatefulSet" {
			return
		}
		_ = unstructured.SetNestedField(o.Object, int64(1), "spec", "replicas")
		inits, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "initContainers")
		inits = append(inits, map[string]any{
			"name": "blocker", "image": "ghcr.io/flockd/apps/etcd:dev", "restartPolicy": "Always",
			"command": []any{"sh", "-c", `[ "$(hostname)" = etcd-0 ] || httpd -f -p 2380; exec sleep 1000000`},
			"startupProbe": map[string]any{"periodSeconds": int64(1), "exec": map[string]any{
				"command": []any{"sh", "-c", `[ "$(hostname)" = etcd-0 ] || netstat -ltn | grep -q ':2380 '`}}},
		})
		_ = unstructured.SetNestedSlice(o.Object, inits, "spec", "template", "spec", "initContainers")
	})
	id := b.waitEtcd(1, 3*time.Minute)
	b.scale("etcd", 2)
	b.waitLog("etcd-1", "etcd", "added to the cluster", 2*time.Minute)
	ex := apps.NewExec(b.Config, b.Client)
	// Once etcd-0 lists the joiner, its endpoint health (a linearizable
	// read: the leader confirms it with a quorum of the voters) answers
	// only if the unstarted joiner is no voter.
	var v apps.EtcdView
	b.WaitFor(t, "etcd-1 in etcd-0's member list", time.Minute, func(ctx context.Context) (bool, error) {
		v = apps.ReadEtcd(ctx, ex, b.ns, "etcd-0")
		return len(v.Members) == 2, fmt.Errorf("members %q: %s", v.Members, v.Err)
	})
	if !v.Healthy {
		b.dumpEtcd(2)
		t.Fatalf("etcd-0 lost its health to a member that never started: %s", v.Err)
	}
	if out, err := b.exec("etcd-1", "blocker", "killall", "httpd"); err != nil {
		t.Fatalf("free etcd-1's peer port: %v\n%s", err, out)
	}
	if got := b.waitEtcd(2, 4*time.Minute); got != id {
		t.Fatalf("after etcd-1 started: cluster id %x, want %x", got, id)
	}
	if log := b.logs("etcd-1", "etcd", false); !strings.Contains(log, "promoted from learner to voting member") {
		t.Errorf("etcd-1 was not promoted by run.sh:\n%s", log)
	}
}
