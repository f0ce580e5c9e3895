package realnode

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/localcluster"
)

var flocksGVR = schema.GroupVersionResource{Group: "flockd.io", Version: "v1alpha1", Resource: "flocks"}

// flock reads the Flock called name.
func (b *bed) flock(ctx context.Context, name string) (*flockv1.Flock, error) {
	dc, err := dynamic.NewForConfig(b.Config)
	if err != nil {
		return nil, err
	}
	u, err := dc.Resource(flocksGVR).Namespace(b.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var f flockv1.Flock
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// scaleFlock sets the Flock's replicas.
func (b *bed) scaleFlock(name string, replicas int) {
	b.t.Helper()
	dc, err := dynamic.NewForConfig(b.Config)
	if err != nil {
		b.t.Fatal(err)
	}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if _, err := dc.Resource(flocksGVR).Namespace(b.ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		b.t.Fatalf("scale Flock %s to %d: %v", name, replicas, err)
	}
}

// claims are the namespace's claims as name -> UID.
func (b *bed) claims() map[string]types.UID {
	b.t.Helper()
	l, err := b.Client.CoreV1().PersistentVolumeClaims(b.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, c := range l.Items {
		out[c.Name] = c.UID
	}
	return out
}

// TestFlockNodePinnedKeepsData is the Flock promise with real data on three
// real nodes (examples/flock/node-pinned.yaml, etcd): a member's pod deleted
// comes back on its node with its data; a member whose node is stopped or
// killed waits for it (no pod elsewhere, no claim deleted; status and an
// Event say which member waits for which node and why) while the other two
// keep serving, and returns with its data when the node starts; members
// scaled 3 -> 1 -> 3 come back to their nodes and volumes (what etcd then
// makes of a member its scripts removed is theirs). "Its data" is read, not inferred
// from objects: a marker file in the member's volume, the etcd member ID
// (kept only with the data directory) and a key written before.
func TestFlockNodePinnedKeepsData(t *testing.T) {
	b := newBed(t)
	e := b.nodePinnedEtcd()
	e.put("etcd-0", "k", "before")
	// Beside etcd's data, a marker of the test's in each member's volume.
	marker := func(m string) string {
		out, err := b.exec(m, "etcd", "cat", "/var/lib/etcd/flock-test-marker")
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return strings.TrimSpace(out)
	}
	ids, nodes := map[string]string{}, map[string]string{}
	for _, m := range e.members {
		ids[m], nodes[m] = e.memberID(m), e.on[m]
		if out, err := b.exec(m, "etcd", "sh", "-c", "echo "+m+"-"+b.ns+" > /var/lib/etcd/flock-test-marker"); err != nil {
			t.Fatalf("write %s's marker: %v: %s", m, err, out)
		}
	}
	// same checks that members run on their nodes with their volumes, as
	// the same etcd members (which they stay only with their data
	// directories).
	same := func(step string, ms ...string) {
		t.Helper()
		for _, m := range ms {
			e.refresh(m)
			if e.on[m] != nodes[m] {
				t.Errorf("%s: %s runs on %s, it ran on %s", step, m, e.on[m], nodes[m])
			}
			if got := marker(m); got != m+"-"+b.ns {
				t.Errorf("%s: %s's volume holds marker %q, not the one written before: its data is not the same", step, m, got)
			}
			if id := e.memberID(m); id != ids[m] {
				t.Errorf("%s: %s is etcd member %s, it was %s: its etcd data is not the same", step, m, id, ids[m])
			}
		}
	}

	// A member's pod deleted.
	old := e.refresh("etcd-1")
	if err := b.Client.CoreV1().Pods(b.ns).Delete(context.Background(), "etcd-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	b.waitPod("etcd-1", "re-created", 3*time.Minute, func(p *corev1.Pod) bool { return p.UID != old.UID })
	same("pod deleted", "etcd-1")
	e.waitKey("etcd-1", "k", "before")

	// The member faulted is one whose node does not run the controller's
	// leader, so that the report of the fault does not wait for a new
	// leader (TestControllerAsShipped covers the takeover).
	ctl := b.leader()
	victim := "etcd-2"
	if e.on[victim] == ctl.Spec.NodeName {
		victim = "etcd-1"
	}
	var serving string // a member that is not the victim
	for _, m := range e.members {
		if m != victim && serving == "" {
			serving = m
		}
	}
	node := e.on[victim]
	for i, fault := range []localcluster.NodeFault{localcluster.NodeStop, localcluster.NodeKill} {
		step := fmt.Sprintf("node %s (%s's) %s", node, victim, fault)
		before := b.claims()
		b.faultNode(node, fault)
		// What each fault is on the node itself: after a stop its
		// containers still run; after a kill its containerd is gone.
		switch got := tasks(b.realNode(node)); {
		case fault == localcluster.NodeStop && !strings.Contains(got, "RUNNING"):
			t.Errorf("%s: the node's containers no longer run:\n%s", step, got)
		case fault == localcluster.NodeKill && got != "":
			t.Errorf("%s: the node's containerd still answers:\n%s", step, got)
		}
		b.waitNode(node, false, 3*time.Minute)
		b.WaitFor(t, step+": the Flock says "+victim+" waits for "+node, 2*time.Minute, func(ctx context.Context) (bool, error) {
			f, err := b.flock(ctx, "etcd")
			if err != nil {
				return false, err
			}
			i := slices.IndexFunc(f.Status.Members, func(m flockv1.MemberStatus) bool { return fmt.Sprintf("etcd-%d", m.Ordinal) == victim })
			return i >= 0 && f.Status.Members[i].Waiting == "NodeNotReady" && f.Status.Members[i].Node == node, nil
		})
		if i == 0 { // one Event per start of a wait; the kill's wait follows the stop's
			b.WaitFor(t, step+": an Event says "+victim+" waits for "+node, time.Minute, func(ctx context.Context) (bool, error) {
				evs, err := b.Client.CoreV1().Events(b.ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=MemberWaiting"})
				if err != nil {
					return false, err
				}
				for _, ev := range evs.Items {
					if strings.Contains(ev.Message, victim) && strings.Contains(ev.Message, "node "+node+" is not Ready") {
						return true, nil
					}
				}
				return false, nil
			})
		}
		// The other two keep serving: a write with two of three members.
		value := "during-" + string(fault)
		e.put(serving, "k", value)
		if p, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), victim, metav1.GetOptions{}); err == nil && p.Spec.NodeName != node {
			t.Errorf("%s: %s has a pod on %s", step, victim, p.Spec.NodeName)
		}
		if after := b.claims(); !maps.Equal(before, after) {
			t.Errorf("%s: claims changed from %v to %v", step, before, after)
		}
		b.faultNode(node, localcluster.NodeStart)
		b.waitNode(node, true, 2*time.Minute)
		same(step+" and start", victim)
		e.waitKey(victim, "k", value)
	}

	// Scaled 3 -> 1 -> 3.
	b.scaleFlock("etcd", 1)
	b.WaitFor(t, "etcd-1 and etcd-2 gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := b.Client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: flockv1.FlockLabel + "=etcd"})
		return err == nil && len(l.Items) == 1, err
	})
	b.scaleFlock("etcd", 3)
	// The members come back to their nodes and volumes. What etcd makes of
	// it is the example scripts' business, not the Flock's: on-change.sh
	// removes scaled-away members from etcd while two of three still have
	// a quorum, so the member ID may be new, or (seen here: run.sh starts a
	// removed member from its log before the cluster can answer, then waits
	// for its pod to be re-created) the member may not serve at all.
	for _, m := range e.members {
		b.waitPod(m, "running", 3*time.Minute, func(p *corev1.Pod) bool { return p.DeletionTimestamp == nil && containerRunning("etcd")(p) })
		p, err := b.Client.CoreV1().Pods(b.ns).Get(context.Background(), m, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != nodes[m] {
			t.Errorf("scaled 3 -> 1 -> 3: %s runs on %s, it ran on %s", m, p.Spec.NodeName, nodes[m])
		}
		if got := marker(m); got != m+"-"+b.ns {
			t.Errorf("scaled 3 -> 1 -> 3: %s's volume holds marker %q, not the one written before", m, got)
		}
	}
}
