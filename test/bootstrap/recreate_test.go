package bootstrap

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/testing/fixture"
	"github.com/flockd/flock/localcluster/clustertest"
	"github.com/flockd/flock/peerfinder"
)

// The cluster record knows when the cluster is gone: a cluster exists while
// the data of any of its members exists (issue 13 item 5). Each test plays
// init-mode peer-finder runs for the pods of StatefulSet "web" with
// -cluster-lease and checks the role its on-start hook gets.

// TestRecreatedStatefulSetWithoutVolumesFormsAgain: a StatefulSet without
// claims is deleted with its pods and created again. No member's data
// survives (no claim, no pod), so pod 0 forms a new cluster.
func TestRecreatedStatefulSetWithoutVolumesFormsAgain(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, true)
	fixture.StatefulSet(t, c.Client, ns, 2, fixture.StatefulSetOptions{})
	old := fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")
	fixture.WaitRunningPod(t, c.Client, ns, "web-1", "")
	wantRole(t, c, ns, "web-0", "form")
	wantRole(t, c, ns, "web-1", "join")

	deleteStatefulSet(t, c, ns)
	fixture.StatefulSet(t, c.Client, ns, 2, fixture.StatefulSetOptions{})
	fixture.WaitRunningPod(t, c.Client, ns, "web-0", string(old.UID))
	fixture.WaitRunningPod(t, c.Client, ns, "web-1", "")
	wantRole(t, c, ns, "web-0", "form")
	wantRole(t, c, ns, "web-1", "join")
	wantRole(t, c, ns, "web-0", "form") // the same pod again: a restart
}

// TestRecreatedStatefulSetFollowsItsClaims runs one StatefulSet with a claim
// per pod through the three cases of the rule: pod 0 loses its claim while
// pod 1 keeps its own (join), the StatefulSet is re-created with its claims
// kept (join), and re-created after its claims were deleted (form).
func TestRecreatedStatefulSetFollowsItsClaims(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	opts := fixture.StatefulSetOptions{Claims: []string{"data"}}
	fixture.HeadlessService(t, c.Client, ns, true)
	provideVolume(t, c, ns, "data-web-0")
	provideVolume(t, c, ns, "data-web-1")
	fixture.StatefulSet(t, c.Client, ns, 2, opts)
	fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")
	fixture.WaitRunningPod(t, c.Client, ns, "web-1", "")
	wantRole(t, c, ns, "web-0", "form")
	wantRole(t, c, ns, "web-1", "join")

	// pod 0 loses its data, pod 1 keeps its claim: still one cluster.
	fixture.Scale(t, c.Client, ns, 0)
	waitNoPods(t, c, ns)
	old := claimUID(t, c, ns, "data-web-0")
	deleteClaims(t, c, ns, "data-web-0")
	provideVolume(t, c, ns, "data-web-0")
	fixture.Scale(t, c.Client, ns, 2)
	fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")
	fixture.WaitRunningPod(t, c.Client, ns, "web-1", "")
	if now := claimUID(t, c, ns, "data-web-0"); now == old {
		t.Fatalf("claim data-web-0 kept its uid %s", old)
	}
	wantRole(t, c, ns, "web-0", "join")
	wantRole(t, c, ns, "web-1", "join")

	// re-created StatefulSet, claims kept: its members have their data.
	deleteStatefulSet(t, c, ns)
	fixture.StatefulSet(t, c.Client, ns, 2, opts)
	fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")
	fixture.WaitRunningPod(t, c.Client, ns, "web-1", "")
	wantRole(t, c, ns, "web-0", "join")
	wantRole(t, c, ns, "web-1", "join")

	// re-created StatefulSet, every claim deleted: a new cluster.
	deleteStatefulSet(t, c, ns)
	deleteClaims(t, c, ns, "data-web-0", "data-web-1")
	provideVolume(t, c, ns, "data-web-0")
	provideVolume(t, c, ns, "data-web-1")
	fixture.StatefulSet(t, c.Client, ns, 2, opts)
	fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")
	fixture.WaitRunningPod(t, c.Client, ns, "web-1", "")
	wantRole(t, c, ns, "web-0", "form")
	wantRole(t, c, ns, "web-1", "join")
}

// TestJoinersFirstThenPodZeroLosesItsData: in a Parallel start the members
// told to join can decide before pod 0 wrote the record. They must be in it
// all the same: when pod 0 later loses its claim, their claims show that
// the cluster exists, and pod 0 joins (it was told form: a second cluster,
// in the etcd campaign).
func TestJoinersFirstThenPodZeroLosesItsData(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	opts := fixture.StatefulSetOptions{Claims: []string{"data"}}
	fixture.HeadlessService(t, c.Client, ns, true)
	for _, claim := range []string{"data-web-0", "data-web-1", "data-web-2"} {
		provideVolume(t, c, ns, claim)
	}
	fixture.StatefulSet(t, c.Client, ns, 3, opts)
	for _, pod := range []string{"web-0", "web-1", "web-2"} {
		fixture.WaitRunningPod(t, c.Client, ns, pod, "")
	}
	wantRole(t, c, ns, "web-1", "join")
	wantRole(t, c, ns, "web-2", "join")
	wantRole(t, c, ns, "web-0", "form")

	fixture.Scale(t, c.Client, ns, 0)
	waitNoPods(t, c, ns)
	deleteClaims(t, c, ns, "data-web-0")
	provideVolume(t, c, ns, "data-web-0")
	fixture.Scale(t, c.Client, ns, 3)
	for _, pod := range []string{"web-0", "web-1", "web-2"} {
		fixture.WaitRunningPod(t, c.Client, ns, pod, "")
	}
	wantRole(t, c, ns, "web-0", "join")
}

// wantRole runs init-mode peer-finder with -cluster-lease=web-cluster as pod
// and checks the role its on-start hook got.
func wantRole(t *testing.T, c *clustertest.Cluster, ns, pod, want string) {
	t.Helper()
	h := newHook(t)
	p := pf{c: c, ns: ns, pod: pod, args: []string{"-kubeconfig=" + c.Kubeconfig, "-source=endpointslice", "-include-not-ready",
		"-expect=auto", "-cluster-lease=web-cluster", "-on-start=" + h.command()}}
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	code, _, stderr := p.main(ctx)
	ds := h.deliveries(t)
	if code != peerfinder.ExitOK || len(ds) != 1 {
		t.Fatalf("%s: exit %d, deliveries %v:\n%s", pod, code, ds, stderr)
	}
	if ds[0].role != want {
		t.Fatalf("%s: role %q, want %q:\n%s", pod, ds[0].role, want, lastLines(stderr, 6))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// provideVolume creates a PersistentVolume bound in advance to claim in ns,
// removed at the end of the test.
func provideVolume(t *testing.T, c *clustertest.Cluster, ns, claim string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ns + "-" + claim + "-"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns + "/" + claim}},
		},
	}
	pv, err := c.Client.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create volume for %s: %v", claim, err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
}

func claimUID(t *testing.T, c *clustertest.Cluster, ns, claim string) string {
	t.Helper()
	pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read claim %s: %v", claim, err)
	}
	return string(pvc.UID)
}

// deleteStatefulSet deletes StatefulSet "web" and waits until it and its
// pods are gone; claims stay.
func deleteStatefulSet(t *testing.T, c *clustertest.Cluster, ns string) {
	t.Helper()
	bg := metav1.DeletePropagationBackground
	if err := c.Client.AppsV1().StatefulSets(ns).Delete(t.Context(), "web", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatalf("delete statefulset: %v", err)
	}
	c.WaitFor(t, "statefulset web gone", wait, func(ctx context.Context) (bool, error) {
		_, err := c.Client.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	waitNoPods(t, c, ns)
}

func waitNoPods(t *testing.T, c *clustertest.Cluster, ns string) {
	t.Helper()
	c.WaitFor(t, "no pods of web", wait, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(l.Items) == 0, err
	})
}

// deleteClaims deletes the claims and waits until they are gone.
func deleteClaims(t *testing.T, c *clustertest.Cluster, ns string, claims ...string) {
	t.Helper()
	for _, name := range claims {
		if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete claim %s: %v", name, err)
		}
	}
	c.WaitFor(t, fmt.Sprintf("claims %v gone", claims), wait, func(ctx context.Context) (bool, error) {
		for _, name := range claims {
			if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
}
