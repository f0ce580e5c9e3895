// The Reconciler's writes: server-side apply, status, and the two deletes
// a changed spec asks for.

package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
)

// replaceStatefulSetForPolicy deletes, orphaning its pods, a StatefulSet of
// the Flock whose podManagementPolicy is not the Flock's (the field is
// immutable): one made with OrderedReady by an earlier version, or a
// Flock whose policy was changed. The next reconcile creates it again with
// the Flock's policy, and it adopts the running pods.
func (r *Reconciler) replaceStatefulSetForPolicy(ctx context.Context, f *flockv1.Flock) error {
	var sts appsv1.StatefulSet
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(f), &sts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get statefulset: %w", err)
	}
	if !metav1.IsControlledBy(&sts, f) {
		return nil // checkOwnership refuses it
	}
	if sts.DeletionTimestamp != nil {
		return &pending{after: time.Second, why: "statefulset being replaced"}
	}
	want := PodManagementPolicy(f)
	if sts.Spec.PodManagementPolicy == want {
		return nil
	}
	if err := r.checkLeader(ctx); err != nil {
		return err
	}
	if err := r.Client.Delete(ctx, &sts, client.Preconditions{UID: &sts.UID}, client.PropagationPolicy(metav1.DeletePropagationOrphan)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete statefulset %s to change its pod management policy: %w", sts.Name, err)
	}
	r.Recorder.Eventf(f, nil, corev1.EventTypeNormal, "StatefulSetReplaced", "Reconcile",
		"StatefulSet %s is re-created with podManagementPolicy %s (was %s); its pods keep running", sts.Name, want, sts.Spec.PodManagementPolicy)
	return &pending{after: time.Second, why: "statefulset being replaced"}
}

// removeDisruptionBudget deletes the Flock's PodDisruptionBudget when the
// Flock no longer asks for one (only one it controls).
func (r *Reconciler) removeDisruptionBudget(ctx context.Context, f *flockv1.Flock) error {
	if f.Spec.PodDisruptionBudget != nil {
		return nil
	}
	var pdb policyv1.PodDisruptionBudget
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(f), &pdb); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&pdb, f) || pdb.DeletionTimestamp != nil {
		return nil
	}
	if err := r.checkLeader(ctx); err != nil {
		return err
	}
	if err := r.Client.Delete(ctx, &pdb, client.Preconditions{UID: &pdb.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete poddisruptionbudget %s: %w", pdb.Name, err)
	}
	return nil
}

// apply server-side applies obj, owning every field it sets.
func (r *Reconciler) apply(ctx context.Context, obj client.Object) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("convert %T %s: %w", obj, obj.GetName(), err)
	}
	delete(m, "status")
	dropNulls(m)
	u := &unstructured.Unstructured{Object: m}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// dropNulls removes null values (such as creationTimestamp) that typed
// objects carry and that apply would otherwise claim.
func dropNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					dropNulls(em)
				}
			}
		}
	}
}

// writeStatus writes the status computed from obs if it changed, and emits
// an Event for each member that starts waiting or moving.
func (r *Reconciler) writeStatus(ctx context.Context, f *flockv1.Flock, obs Observed) error {
	st := Status(obs)
	was := map[int32]string{}
	for _, m := range f.Status.Members {
		was[m.Ordinal] = m.Waiting
	}
	if err := r.updateStatus(ctx, f, st); err != nil {
		return err
	}
	r.Metrics.Record(f.Namespace, f.Name, st)
	for _, m := range st.Members {
		if m.Waiting != "" && was[m.Ordinal] != m.Waiting {
			r.Recorder.Eventf(f, nil, corev1.EventTypeWarning, "MemberWaiting", "Place", "member %s-%d waits: %s", f.Name, m.Ordinal, waitMessage(m.Waiting, m.Node))
		}
	}
	for _, o := range sortedKeys(obs.Placement.Started) {
		from, to := obs.Placement.Started[o], obs.Placement.Assign[o]
		data := "empty data"
		if slices.ContainsFunc(obs.Volumes, func(pv corev1.PersistentVolume) bool {
			return pv.Labels[flockv1.MemberLabel] == strconv.Itoa(int(o)) && pv.Annotations[nodeAnnotation] == to
		}) {
			data = "the data it left there on an earlier move"
		}
		why := "as asked (" + flockv1.ReassignAnnotation + ")"
		if d, ok := obs.Placement.NodeLost[o]; ok {
			why = fmt.Sprintf("because its node was lost for %s (spec.nodeLoss policy Reassign)", d.Round(time.Second))
		}
		r.Recorder.Eventf(f, nil, corev1.EventTypeNormal, "MemberMoved", "Reassign",
			"member %d moves from node %s to %s %s and starts there with %s; its data on %s stays there", o, from, to, why, data, from)
	}
	return nil
}

// updateStatus writes st as f's status unless it is unchanged.
func (r *Reconciler) updateStatus(ctx context.Context, f *flockv1.Flock, st flockv1.FlockStatus) error {
	if equality.Semantic.DeepEqual(st, f.Status) {
		return nil
	}
	f.Status = st
	if err := r.Client.Status().Update(ctx, f); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}
