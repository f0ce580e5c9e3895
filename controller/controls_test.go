package controller_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/controller"
)

// TestStatefulSetControls on the local cluster: a Flock's
// podManagementPolicy, updateStrategy and podDisruptionBudget reach its
// StatefulSet and budget; changing the policy re-creates the StatefulSet
// with the running pods kept; removing the budget deletes it.
func TestStatefulSetControls(t *testing.T) {
	e := newEnv(t, 2)
	e.startManager()
	ctx := context.Background()
	f := e.flock("sc", flockv1.ModeNodePinned, 2)
	f.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	f.Spec.UpdateStrategy = flockv1.UpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	f.Spec.PodDisruptionBudget = &flockv1.PodDisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(1))}
	if err := e.cl.Create(ctx, f); err != nil {
		t.Fatal(err)
	}
	e.waitPinnedReady("sc", 2)
	key := types.NamespacedName{Namespace: e.ns, Name: "sc"}
	var sts appsv1.StatefulSet
	if err := e.cl.Get(ctx, key, &sts); err != nil {
		t.Fatal(err)
	}
	if sts.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement || sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("statefulset policy %s, strategy %+v; want OrderedReady, OnDelete", sts.Spec.PodManagementPolicy, sts.Spec.UpdateStrategy)
	}
	var pdb policyv1.PodDisruptionBudget
	e.c.WaitFor(t, "budget sc allows 1 disruption", deadline, func(ctx context.Context) (bool, error) {
		if err := e.cl.Get(ctx, key, &pdb); err != nil {
			return false, err
		}
		return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.ExpectedPods == 2 && pdb.Status.DisruptionsAllowed == 1, fmt.Errorf("status %+v", pdb.Status)
	})
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || !metav1.IsControlledBy(&pdb, e.get("sc")) {
		t.Errorf("budget spec %+v, owners %v; want minAvailable 1, controlled by the Flock", pdb.Spec, pdb.OwnerReferences)
	}

	uids := map[string]types.UID{}
	for _, n := range []string{"sc-0", "sc-1"} {
		p, err := e.pod(n)
		if err != nil {
			t.Fatal(err)
		}
		uids[n] = p.UID
	}
	patch := `{"spec":{"podManagementPolicy":"Parallel","updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":1}},"podDisruptionBudget":null}}`
	if err := e.cl.Patch(ctx, e.get("sc"), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	e.c.WaitFor(t, "statefulset sc re-created with Parallel and a partitioned RollingUpdate", deadline, func(ctx context.Context) (bool, error) {
		var got appsv1.StatefulSet
		if err := e.cl.Get(ctx, key, &got); err != nil {
			return false, err
		}
		u := got.Spec.UpdateStrategy
		return got.UID != sts.UID && got.Spec.PodManagementPolicy == appsv1.ParallelPodManagement &&
				u.Type == appsv1.RollingUpdateStatefulSetStrategyType && u.RollingUpdate != nil && ptr.Deref(u.RollingUpdate.Partition, 0) == 1,
			fmt.Errorf("uid %s (was %s), policy %s, strategy %+v", got.UID, sts.UID, got.Spec.PodManagementPolicy, u)
	})
	e.c.WaitFor(t, "budget sc deleted", deadline, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(e.cl.Get(ctx, key, &policyv1.PodDisruptionBudget{})), nil
	})
	e.waitPinnedReady("sc", 2)
	for n, uid := range uids {
		if p, err := e.pod(n); err != nil || p.UID != uid {
			t.Errorf("pod %s: %v, uid %s, want the running pod %s kept", n, err, p.UID, uid)
		}
	}
	e.waitEvent("StatefulSetReplaced", "podManagementPolicy Parallel (was OrderedReady)")
}

// TestForeignDisruptionBudgetRefused: a PodDisruptionBudget of the Flock's
// name that the Flock does not control is left alone and the Flock is
// refused (Degraded, PodDisruptionBudgetNotOwned, an Event).
func TestForeignDisruptionBudgetRefused(t *testing.T) {
	e := newEnv(t, 1)
	e.startManager()
	ctx := context.Background()
	foreign := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "fb"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}},
	}
	if err := e.cl.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	f := e.flock("fb", flockv1.ModeNodePinned, 1)
	f.Spec.PodDisruptionBudget = &flockv1.PodDisruptionBudget{}
	if err := e.cl.Create(ctx, f); err != nil {
		t.Fatal(err)
	}
	e.c.WaitFor(t, "flock fb Degraded: budget not owned", deadline, func(context.Context) (bool, error) {
		c := meta.FindStatusCondition(e.get("fb").Status.Conditions, flockv1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == controller.RefusedBudgetNotOwned, fmt.Errorf("degraded %+v", c)
	})
	e.waitEvent(controller.RefusedBudgetNotOwned, "fb")
	var got policyv1.PodDisruptionBudget
	if err := e.cl.Get(ctx, client.ObjectKeyFromObject(foreign), &got); err != nil {
		t.Fatal(err)
	}
	if got.UID != foreign.UID || len(got.OwnerReferences) != 0 || got.Spec.MaxUnavailable.IntValue() != 0 {
		t.Errorf("foreign budget changed: %+v owners %v", got.Spec, got.OwnerReferences)
	}
	var sts appsv1.StatefulSet
	if err := e.cl.Get(ctx, client.ObjectKeyFromObject(f), &sts); !apierrors.IsNotFound(err) {
		t.Errorf("statefulset fb: %v; want none while the Flock is refused", err)
	}
}
