//go:build torch

package realnode

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// torchExample is the torch example's manifest.
const torchExample = "examples/batch/torch/torch.yaml"

// setInitImage sets the image of a Job's init containers (peer-finder's):
// $FLOCK_TORCH_PEER_FINDER, an image built under another tag and loaded
// into the real nodes while the cluster still runs an older one.
func setInitImage(t *testing.T, o *unstructured.Unstructured, img string) {
	t.Helper()
	inits, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "initContainers")
	if err != nil || len(inits) == 0 {
		t.Fatalf("Job %s has no init containers: %v", o.GetName(), err)
	}
	for _, c := range inits {
		c.(map[string]any)["image"] = img
	}
	_ = unstructured.SetNestedSlice(o.Object, inits, "spec", "template", "spec", "initContainers")
}

// TestExampleTorch runs examples/batch/torch as written on two real nodes
// (make test-torch: the build tag torch, and FLOCK_TORCH_IMAGE naming the
// archive make torch-image wrote, imported here into every real node's
// containerd): each trainer initialises torch.distributed (gloo, env://)
// from the rendezvous file peer-finder wrote, the allreduce sums to 3 on
// both ranks, rank 0 reaches rank 1 on the other node by flock's names, the
// Job completes, and no pod runs as root.
func TestExampleTorch(t *testing.T) {
	archive := os.Getenv("FLOCK_TORCH_IMAGE")
	if archive == "" {
		t.Fatal("FLOCK_TORCH_IMAGE is not set: run make test-torch, which builds the image and sets it")
	}
	b := newBed(t)
	b.NeedRealNodes(t, 2)
	b.dumpOnFailure("app=torch")
	start := time.Now()
	b.ctr("images", "import", archive)
	t.Logf("image imported into %d real nodes in %s", len(b.RealNodes), time.Since(start).Round(time.Millisecond))

	start = time.Now()
	b.apply(repoFile(t, torchExample), func(o *unstructured.Unstructured) {
		b.forRealNode(o)
		if img := os.Getenv("FLOCK_TORCH_PEER_FINDER"); img != "" && o.GetKind() == "Job" {
			setInitImage(t, o, img)
		}
	})
	b.waitJobComplete("trainer", 5*time.Minute)
	t.Logf("Job trainer Complete %s after it was applied", time.Since(start).Round(time.Millisecond))

	pods, err := b.Client.CoreV1().Pods(b.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=torch"})
	if err != nil {
		t.Fatal(err)
	}
	nodeOf := map[string]string{} // host name -> node
	for _, p := range pods.Items {
		if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s runs without runAsNonRoot", p.Name)
		}
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("%s: phase %s", p.Name, p.Status.Phase)
			continue
		}
		nodeOf[p.Spec.Hostname] = p.Spec.NodeName
		log := b.logs(p.Name, "trainer", false)
		t.Logf("%s on %s:\n%s", p.Name, p.Spec.NodeName, log)
		if !strings.Contains(log, "MASTER_ADDR=trainer-0 MASTER_PORT=29500 WORLD_SIZE=2 ") {
			t.Errorf("%s: no rendezvous of trainer-0:29500 for 2 in its log", p.Name)
		}
		if !strings.Contains(log, "allreduce sum 3, want 3: PASSED\n") {
			t.Errorf("%s: no allreduce sum 3 in its log", p.Name)
		}
	}
	if len(nodeOf) != 2 || nodeOf["trainer-0"] == nodeOf["trainer-1"] {
		t.Fatalf("trainers on nodes %v, want trainer-0 and trainer-1 on two nodes", nodeOf)
	}
	var rank0 string
	for _, p := range pods.Items {
		if p.Spec.Hostname == "trainer-0" {
			rank0 = b.logs(p.Name, "trainer", false)
		}
	}
	for i, h := range []string{"trainer-0", "trainer-1"} {
		if want := fmt.Sprintf("rank %d on %s (node %s)\n", i, h, nodeOf[h]); !strings.Contains(rank0, want) {
			t.Errorf("rank 0's log lacks %q", want)
		}
	}
	if !strings.Contains(rank0, "ranks on 2 nodes\n") {
		t.Error("rank 0's log lacks: ranks on 2 nodes")
	}
}
