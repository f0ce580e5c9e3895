package controller_test

// Integration tests of the controller's safety rules (issue 15): no member
// lands on empty data without a current, explicit request; status never
// lies.

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/internal/controller"
)

// settle gives the controller a moment to act on a change the test cannot
// observe (before a fix, a leftover annotation has no visible effect
// until a later event); it bounds nothing.
func settle() { time.Sleep(2 * time.Second) }

// claimVolume returns the volume member ord's claim is bound to.
func (e *env) claimVolume(name string, ord int32) string {
	var pvc corev1.PersistentVolumeClaim
	key := types.NamespacedName{Namespace: e.ns, Name: controller.ClaimName(e.get(name), "data", ord)}
	if err := e.cl.Get(context.Background(), key, &pvc); err != nil {
		e.t.Fatalf("get claim %s: %v", key.Name, err)
	}
	return pvc.Spec.VolumeName
}

// TestReassignIsNotAStandingOrder: a bare "1" set while member 1's node is
// fine, and an entry for an inactive member, are refused and consumed; a
// later cordon or scale-up moves nothing.
func TestReassignIsNotAStandingOrder(t *testing.T) {
	e := newEnv(t, 3)
	e.startManager()
	if err := e.cl.Create(context.Background(), e.flock("so", flockv1.ModeNodePinned, 2)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("so", 2)
	vol1 := e.claimVolume("so", 1)

	e.annotate("so", flockv1.ReassignAnnotation, "1")
	settle()
	e.setUnschedulable(nodes[1], true)
	t.Cleanup(func() { e.setUnschedulable(nodes[1], false) })
	e.c.WaitFor(t, "member 1 running on its cordoned node, not moved", deadline, func(context.Context) (bool, error) {
		f := e.get("so")
		if m := members(f)[1]; m.Node != nodes[1] {
			t.Fatalf("member 1 moved from %s to %s by a leftover bare reassign and a later cordon", nodes[1], m.Node)
		}
		_, left := f.Annotations[flockv1.ReassignAnnotation]
		return !left && f.Status.ReadyReplicas == 2, fmt.Errorf("annotations %v ready %d", f.Annotations, f.Status.ReadyReplicas)
	})
	e.waitEvent("ReassignRefused", "reassign 1 refused")
	settle()
	if got := e.claimVolume("so", 1); got != vol1 {
		t.Fatalf("member 1's claim now bound to %s, was %s: its claim was released", got, vol1)
	}
	if m := members(e.get("so"))[1]; m.Node != nodes[1] || m.MovingFrom != "" {
		t.Fatalf("member 1 %+v after the cordon, want still on %s", m, nodes[1])
	}
	e.setUnschedulable(nodes[1], false)

	// An entry for an inactive member is refused, not kept for a scale-up.
	e.scale("so", 1)
	e.waitPinnedReady("so", 1)
	free := ""
	for _, n := range e.nodes {
		if n != nodes[0] && n != nodes[1] {
			free = n
		}
	}
	e.annotate("so", flockv1.ReassignAnnotation, "1="+free)
	settle()
	e.scale("so", 2)
	got := e.waitPinnedReady("so", 2)
	if got[1] != nodes[1] {
		t.Fatalf("member 1 came back on %s, want its own node %s (an entry set while it was inactive applied at scale-up)", got[1], nodes[1])
	}
	if got := e.claimVolume("so", 1); got != vol1 {
		t.Errorf("member 1's claim bound to %s, want its old volume %s", got, vol1)
	}
	if f := e.get("so"); f.Annotations[flockv1.ReassignAnnotation] != "" {
		t.Errorf("annotation left: %v", f.Annotations)
	}
}

// TestErrorKeepsStatus: a malformed annotation and a failing apply never
// empty the status (members, counts, observedGeneration stay) and never
// change placement.
func TestErrorKeepsStatus(t *testing.T) {
	e := newEnv(t, 4)
	e.startManager()
	ctx := context.Background()
	if err := e.cl.Create(ctx, e.flock("es", flockv1.ModeNodePinned, 3)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("es", 3)
	good := e.get("es")

	// keeps fails the test as soon as the status loses what it had.
	keeps := func(f *flockv1.Flock) {
		t.Helper()
		ms := members(f)
		for i := range int32(3) {
			if ms[i].Node != nodes[i] || !ms[i].Active {
				t.Fatalf("member %d status %+v, want active on %s (status %+v)", i, ms[i], nodes[i], f.Status)
			}
		}
		if f.Status.ReadyReplicas != 3 || f.Status.Replicas != 3 {
			t.Fatalf("status replicas %d ready %d with all 3 members running: the status lies", f.Status.Replicas, f.Status.ReadyReplicas)
		}
	}

	e.annotate("es", flockv1.ReassignAnnotation, "four")
	settle()
	e.c.WaitFor(t, "malformed annotation refused and consumed", deadline, func(context.Context) (bool, error) {
		f := e.get("es")
		keeps(f)
		_, left := f.Annotations[flockv1.ReassignAnnotation]
		return !left, nil
	})
	e.waitEvent("ReassignRefused", "four")

	// A template the StatefulSet API refuses: every apply fails.
	f := e.get("es")
	f.Spec.Template.Spec.Containers[0].Name = "App_1"
	if err := e.cl.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	bad := e.get("es").Generation
	e.c.WaitFor(t, "Degraded ReconcileError, last good status kept", deadline, func(context.Context) (bool, error) {
		f := e.get("es")
		keeps(f)
		if f.Status.ObservedGeneration != good.Status.ObservedGeneration {
			t.Fatalf("observedGeneration %d after a failed reconcile of generation %d, want %d", f.Status.ObservedGeneration, bad, good.Status.ObservedGeneration)
		}
		c := meta.FindStatusCondition(f.Status.Conditions, flockv1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "ReconcileError", fmt.Errorf("Degraded %+v", c)
	})
	settle()
	keeps(e.get("es"))

	f = e.get("es")
	f.Spec.Template.Spec.Containers[0].Name = "app"
	if err := e.cl.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	if got := e.waitPinnedReady("es", 3); !maps.Equal(got, nodes) {
		t.Fatalf("placement %v after the error, want %v", got, nodes)
	}
	if c := meta.FindStatusCondition(e.get("es").Status.Conditions, flockv1.ConditionDegraded); c.Status != metav1.ConditionFalse {
		t.Errorf("Degraded after the fix = %+v", c)
	}
}
