package apps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/flockd/flock/localcluster"
)

// TestNodeFaultWaitsForItsMember: a node fault's member may have no node
// for minutes (an OrderedReady set creates member 2 once 0 and 1 are
// Ready), and the API server may be restarting when it is asked. The fault
// waits through both and takes down the node the member lands on. In
// galera-15's round 15 it gave up after two minutes on a refused
// connection, which stopped the campaign.
func TestNodeFaultWaitsForItsMember(t *testing.T) {
	cs := fake.NewClientset()
	gets := 0
	cs.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-2", Namespace: "ns"}}
		switch {
		case gets <= 150: // not created yet
			return true, nil, apierrors.NewNotFound(corev1.Resource("pods"), "db-2")
		case gets <= 153: // the API server restarting
			return true, nil, errors.New("dial tcp 10.245.0.1:37337: connect: connection refused")
		case gets <= 155: // not scheduled yet
			return true, pod, nil
		}
		pod.Spec.NodeName = "real-1"
		return true, pod, nil
	})
	var done []string
	c := &Campaign{Client: cs, FaultNode: func(_ context.Context, node string, f localcluster.NodeFault) error {
		done = append(done, fmt.Sprintf("%s %s", f, node))
		return nil
	}}
	c.faultPoll = time.Millisecond
	ctx := context.Background()
	node, err := c.nodeOf(ctx, "ns", "db-2", 0)
	if err != nil {
		t.Fatalf("db-2's node after %d gets: %v", gets, err)
	}
	if err := c.nodeFault(ctx, node, "db-2", NodeFault{Member: 2, Fault: localcluster.NodeKill, Down: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"kill real-1", "start real-1"}; !slices.Equal(done, want) {
		t.Errorf("faults %q, want %q", done, want)
	}
}

// TestNodeFaultEndsWithItsRound: waiting for a member that never lands on
// a node ends with the round (judged stuck, or stopped), with its error.
func TestNodeFaultEndsWithItsRound(t *testing.T) {
	cs := fake.NewClientset()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c := &Campaign{Client: cs}
	c.faultPoll = time.Millisecond
	node, err := c.nodeOf(ctx, "ns", "db-2", 0)
	if node != "" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("node of a member never created: %q, %v; want the round's context error", node, err)
	}
}
