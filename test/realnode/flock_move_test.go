package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/localcluster"
)

// TestFlockNodeLoss moves etcd members off lost real nodes (the example of
// examples/flock/node-pinned.yaml on three nodes, a fourth one spare):
//   - a member whose node is killed is moved by an explicit bare
//     flockd.io/reassign to the free node with a fresh volume, and the
//     example's scripts replace its old etcd member;
//   - under spec.nodeLoss policy Reassign, a member whose node is killed
//     moves by itself once the node has been lost longer than after;
//   - with two nodes killed at once, nothing moves.
//
// After each move the cluster has one cluster ID, three voting members and
// the key written at the start, and the old node's directory is left as it
// was, also once that node is back.
func TestFlockNodeLoss(t *testing.T) {
	b := newBed(t)
	spare := b.realNode(b.GrowRealNodes(t, 4)[3])
	e := b.nodePinnedEtcd()
	b.labelNode(spare.Name, "node-role.example.com/db", "true")
	t.Cleanup(func() { _ = os.RemoveAll(spare.HostPath(filepath.Join(localcluster.NodeLocalDir, b.ns))) })
	cluster := e.status("etcd-0").Header.ClusterID
	e.put("etcd-0", "k", "before")
	for _, m := range e.members {
		if out, err := b.exec(m, "etcd", "sh", "-c", "echo "+m+" > /var/lib/etcd/flock-test-marker"); err != nil {
			t.Fatalf("write %s's marker: %v: %s", m, err, out)
		}
	}
	// Victims are members whose node does not run the controller's leader
	// (TestControllerAsShipped covers the takeover).
	leaderNode := b.leader().Spec.NodeName
	victims := func() []string {
		var out []string
		for _, m := range e.members {
			e.refresh(m)
			if e.on[m] != leaderNode {
				out = append(out, m)
			}
		}
		return out
	}
	// rebuilt checks that m runs on node with a fresh volume, as a new
	// member of the one cluster, which has three voting members and the key.
	rebuilt := func(step, m, node string) {
		t.Helper()
		e.refresh(m)
		if e.on[m] != node {
			t.Fatalf("%s: %s runs on %s, want %s", step, m, e.on[m], node)
		}
		if out, err := b.exec(m, "etcd", "cat", "/var/lib/etcd/flock-test-marker"); err == nil {
			t.Errorf("%s: %s's new volume holds the marker %q: it is not fresh", step, m, out)
		}
		e.votingMembers(step, 3)
		for _, o := range e.members {
			if id := e.status(o).Header.ClusterID; id != cluster {
				t.Errorf("%s: %s is in cluster %s, want %s", step, o, id, cluster)
			}
		}
		e.waitKey(m, "k", "before")
	}
	// leftAlone checks that m's directory on node still holds m's marker.
	leftAlone := func(step, m, node string) {
		t.Helper()
		f := b.realNode(node).HostPath(filepath.Join(localcluster.NodeLocalDir, b.ns, "etcd", "data-"+m[len("etcd-"):], "flock-test-marker"))
		if got, err := os.ReadFile(f); err != nil || strings.TrimSpace(string(got)) != m {
			t.Errorf("%s: %s's old directory on %s: marker %q, %v; want it left as it was", step, m, node, got, err)
		}
	}

	// 1. An explicit reassign of a member whose node is down.
	victim := victims()[0]
	lost := e.on[victim]
	b.faultNode(lost, localcluster.NodeKill)
	b.waitNode(lost, false, 3*time.Minute)
	e.waitsFor(victim, lost, "NodeNotReady")
	b.patchFlock("etcd", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, flockv1.ReassignAnnotation, victim[len("etcd-"):]))
	b.waitEvent("MemberMoved", "as asked")
	rebuilt("reassign", victim, spare.Name)
	leftAlone("reassign", victim, lost)
	b.faultNode(lost, localcluster.NodeStart)
	b.waitNode(lost, true, 2*time.Minute)
	time.Sleep(10 * time.Second) // the node's kubelet removes the pod it had
	leftAlone("reassign, node back", victim, lost)

	// 2. The node-loss policy: a member whose node is killed moves by itself,
	// to the free node (not one where it left older data: the first
	// victim's old node holds only the first victim's).
	b.patchFlock("etcd", `{"spec":{"nodeLoss":{"policy":"Reassign","after":"20s"}}}`)
	first := victim
	victim = slices.DeleteFunc(victims(), func(m string) bool { return m == first })[0]
	from, free := e.on[victim], lost
	b.faultNode(from, localcluster.NodeKill)
	b.waitNode(from, false, 3*time.Minute)
	note := b.waitEvent("MemberMoved", "its node was lost")
	if !strings.Contains(note, "from node "+from+" to "+free) {
		t.Errorf("MemberMoved says %q, want %s from %s to %s", note, victim, from, free)
	}
	rebuilt("node loss", victim, free)
	leftAlone("node loss", victim, from)
	b.faultNode(from, localcluster.NodeStart)
	b.waitNode(from, true, 2*time.Minute)

	// 3. Two nodes lost at once: nothing moves, and status says why.
	vs := victims()
	if len(vs) < 2 {
		t.Fatalf("members %v on %v, the leader on %s: fewer than two victims", e.members, e.on, leaderNode)
	}
	placed := map[string]string{}
	for _, m := range e.members {
		placed[m] = e.on[m]
	}
	for _, m := range vs[:2] {
		b.faultNode(placed[m], localcluster.NodeKill)
	}
	for _, m := range vs[:2] {
		b.waitNode(placed[m], false, 3*time.Minute)
		e.waitsFor(m, placed[m], "NodeNotReady")
	}
	// The controller says "not moved: member N is not Ready either" only
	// when it decides, after (20s) has run out for the member: its status
	// is written by the reconcile that held both.
	b.WaitFor(t, "Degraded says why neither moves", 2*time.Minute, func(ctx context.Context) (bool, error) {
		f, err := b.flock(ctx, "etcd")
		if err != nil {
			return false, err
		}
		for _, c := range f.Status.Conditions {
			if c.Type == flockv1.ConditionDegraded {
				return strings.Count(c.Message, "is not Ready either") == 2, fmt.Errorf("Degraded: %s", c.Message)
			}
		}
		return false, nil
	})
	f, err := b.flock(context.Background(), "etcd")
	if err != nil {
		t.Fatal(err)
	}
	for _, ms := range f.Status.Members {
		if m := fmt.Sprintf("etcd-%d", ms.Ordinal); ms.Node != placed[m] || ms.MovingFrom != "" {
			t.Errorf("two nodes lost: %s is %+v, want it left on %s", m, ms, placed[m])
		}
	}
	for _, m := range vs[:2] {
		b.faultNode(placed[m], localcluster.NodeStart)
	}
	for _, m := range e.members {
		e.refresh(m)
		if e.on[m] != placed[m] {
			t.Errorf("nodes back: %s runs on %s, want %s", m, e.on[m], placed[m])
		}
	}
	e.votingMembers("nodes back", 3)
}

// waitsFor waits until the Flock's status says member m waits for node
// with the reason.
func (e *nodePinnedEtcd) waitsFor(m, node, reason string) {
	e.b.t.Helper()
	e.b.WaitFor(e.b.t, fmt.Sprintf("the Flock says %s waits for %s (%s)", m, node, reason), 2*time.Minute, func(ctx context.Context) (bool, error) {
		f, err := e.b.flock(ctx, "etcd")
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(f.Status.Members, func(ms flockv1.MemberStatus) bool { return fmt.Sprintf("etcd-%d", ms.Ordinal) == m })
		return i >= 0 && f.Status.Members[i].Waiting == reason && f.Status.Members[i].Node == node, nil
	})
}

// votingMembers waits until the cluster, asked through each Ready member,
// has n members, all started and none a learner.
func (e *nodePinnedEtcd) votingMembers(step string, n int) {
	e.b.t.Helper()
	e.b.WaitFor(e.b.t, fmt.Sprintf("%s: %d voting etcd members", step, n), 3*time.Minute, func(ctx context.Context) (bool, error) {
		body, err := e.call(ctx, "etcd-0", "/v3/cluster/member/list", "{}")
		if err != nil {
			return false, err
		}
		var l struct {
			Members []struct {
				Name      string `json:"name"`
				IsLearner bool   `json:"isLearner"`
			} `json:"members"`
		}
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			return false, err
		}
		voting := 0
		for _, m := range l.Members {
			if m.Name != "" && !m.IsLearner {
				voting++
			}
		}
		return voting == n && len(l.Members) == n, fmt.Errorf("members %s", body)
	})
}

// patchFlock merge-patches the Flock called name.
func (b *bed) patchFlock(name, patch string) {
	b.t.Helper()
	dc, err := dynamic.NewForConfig(b.Config)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := dc.Resource(flocksGVR).Namespace(b.ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		b.t.Fatalf("patch Flock %s with %s: %v", name, patch, err)
	}
}

// waitEvent waits for an Event of the reason whose message contains substr
// in the test's namespace and returns the message.
func (b *bed) waitEvent(reason, substr string) string {
	b.t.Helper()
	var msg string
	b.WaitFor(b.t, fmt.Sprintf("a %s Event saying %q", reason, substr), 3*time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := b.Client.CoreV1().Events(b.ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, substr) {
				msg = ev.Message
				return true, nil
			}
		}
		return false, nil
	})
	return msg
}
