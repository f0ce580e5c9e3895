package realnode

import (
	"context"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/localcluster"
	"github.com/flockd/flock/localcluster/apps"
)

// TestCampaignSmoke runs two rounds of bench/campaign per application
// (apps.Apps: etcd, zookeeper, redis, galera, each its example under its own
// oracle) for flock only, under the same fault schedule (start skew, a
// member killed mid-bootstrap, a scale-up during bootstrap, member 0's data
// lost once healthy and marked, members spread over the real nodes), the
// applications and rounds in parallel, and fails on any split brain or
// stuck round. The API server restarts, CoreDNS cache and outages and node
// faults of the full campaign are left out: other packages share this
// cluster. FLOCK_CAMPAIGN_SEED replays a schedule.
func TestCampaignSmoke(t *testing.T) {
	t.Parallel() // its own namespaces; a few minutes
	b := newBed(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FLOCK_CAMPAIGN_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("FLOCK_CAMPAIGN_SEED: %v", err)
		}
	}
	t.Logf("seed %d (FLOCK_CAMPAIGN_SEED=%d replays it)", seed, seed)
	for _, name := range slices.Sorted(maps.Keys(apps.Apps)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			manifests, err := apps.Manifests(repoPath(t, "examples/apps/"+name))
			if err != nil {
				t.Fatal(err)
			}
			c := &apps.Campaign{Config: b.Config, Client: b.Client, App: apps.Apps[name], Manifests: manifests,
				Stall: apps.StallFor(name), Deadline: apps.DefaultDeadline, LogDir: t.TempDir(), Edit: apps.ForRealNode}
			const rounds = 2
			var wg sync.WaitGroup
			outs := make([]apps.Outcome, rounds)
			start := time.Now()
			for r := range rounds {
				wg.Go(func() { outs[r] = c.Run(context.Background(), apps.Flock, apps.NewPlan(seed, r, 3)) })
			}
			wg.Wait()
			for _, o := range outs {
				switch {
				case o.Split:
					t.Errorf("%s: split brain: %s (logs in %s/%s)", o.Plan, o.Detail, c.LogDir, o.NS)
				case o.Aborted:
					t.Errorf("%s: could not run: %s", o.Plan, o.Detail)
				case o.Stuck:
					t.Errorf("%s: stuck: %s (logs in %s/%s)", o.Plan, o.Detail, c.LogDir, o.NS)
				default:
					t.Logf("%s: healthy after %s, rejoin %s", o.Plan, o.Healthy.Round(time.Second), o.Rejoin.Round(time.Second))
				}
			}
			t.Logf("%d rounds in %s", rounds, time.Since(start).Round(time.Second))
			if t.Failed() {
				logDir(t, c.LogDir)
			}
		})
	}
}

// logDir logs the files under dir (a failed round's container logs).
func logDir(t *testing.T, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		files, _ := os.ReadDir(dir + "/" + e.Name())
		for _, f := range files {
			b, _ := os.ReadFile(dir + "/" + e.Name() + "/" + f.Name())
			t.Logf("--- %s/%s:\n%s", e.Name(), f.Name(), brief(string(b)))
		}
	}
}

// TestForRealNodeLetsAPinnedMemberBack: the campaign's spread over the real
// nodes never keeps out a member whose claim pins it to one node. In
// galera-14's round 29 galera-1 was deleted, galera-3 and galera-4 (a
// scale-up) were placed on real-0 while it was away, and galera-1, its
// volume on real-0, stayed unschedulable for good under a hard spread
// (three members on real-0 against one elsewhere); the others waited for it.
func TestForRealNodeLetsAPinnedMemberBack(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	node := b.NeedRealNodes(t, 2)[0].Name
	set := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"name": "pinned"},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"app": "pinned"}},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "pause", "image": localcluster.PauseImage}}},
		}},
	}}
	apps.ForRealNode(b.ns, set)
	raw, _, _ := unstructured.NestedMap(set.Object, "spec", "template")
	var tmpl corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	member := func(name string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		p.Name = name
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
		return p
	}
	// Two members already on the node, as the scheduler had placed them.
	for _, name := range []string{"pinned-3", "pinned-4"} {
		p := member(name)
		p.Spec.NodeName = node
		b.createPod(p)
	}
	// The third can only go there: its volume's node affinity.
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: b.ns + "-pinned-1"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: t.TempDir(), Type: ptr.To(corev1.HostPathDirectoryOrCreate)}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	ctx := context.Background()
	if _, err := b.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-pinned-1"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(""),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if _, err := b.Client.CoreV1().PersistentVolumeClaims(b.ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := member("pinned-1")
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}})
	b.createPod(p)
	var last *corev1.Pod
	defer func() {
		if t.Failed() && last != nil {
			for _, c := range last.Status.Conditions {
				t.Logf("%s: %s=%s %s: %s", last.Name, c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}()
	got := b.waitPod(p.Name, "scheduled on "+node, 2*time.Minute, func(p *corev1.Pod) bool { last = p; return p.Spec.NodeName != "" })
	if got.Spec.NodeName != node {
		t.Errorf("%s scheduled on %q, want %s", p.Name, got.Spec.NodeName, node)
	}
}
