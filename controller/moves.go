// The Reconciler carrying out placement: where members' data is, moves
// to complete, Released volumes to rebind, reassignments to consume.

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
)

func (r *Reconciler) volumes(ctx context.Context, f *flockv1.Flock) ([]corev1.PersistentVolume, error) {
	var pvs corev1.PersistentVolumeList
	err := r.Client.List(ctx, &pvs, client.MatchingLabels{flockv1.FlockLabel: f.Name, flockv1.NamespaceLabel: f.Namespace})
	if err != nil {
		return nil, fmt.Errorf("list persistentvolumes: %w", err)
	}
	return pvs.Items, nil
}

// place computes the NodePinned placement from the Flock's volumes (where
// the data is), its status, the nodes and the reassign annotation.
func (r *Reconciler) place(ctx context.Context, f *flockv1.Flock, now time.Time) (Placement, map[string]string, error) {
	pvs, err := r.volumes(ctx, f)
	if err != nil {
		return Placement{}, nil, err
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return Placement{}, nil, fmt.Errorf("list nodes: %w", err)
	}
	infos := make([]NodeInfo, 0, len(nodes.Items))
	hostnames := map[string]string{}
	for i := range nodes.Items {
		infos = append(infos, NodeInfoFrom(&nodes.Items[i]))
		hostnames[nodes.Items[i].Name] = nodes.Items[i].Labels[hostnameLabel]
	}
	// A malformed annotation is refused as a whole (and consumed): it never
	// stops the reconcile, and no entry of it moves anything.
	reassign, perr := ParseReassign(f.Annotations[flockv1.ReassignAnnotation])
	moving, lostSince := map[int32]string{}, map[int32]time.Time{}
	for _, m := range f.Status.Members {
		if m.MovingFrom != "" {
			moving[m.Ordinal] = m.MovingFrom
		}
		if lostNode(m.Waiting) && m.WaitingSince != nil {
			lostSince[m.Ordinal] = m.WaitingSince.Time
		}
	}
	current := CurrentAssignments(f.Status.Members, pvs)
	dataOn := map[int32][]string{}
	for i := range pvs {
		if ord, err := strconv.ParseInt(pvs[i].Labels[flockv1.MemberLabel], 10, 32); err == nil {
			dataOn[int32(ord)] = append(dataOn[int32(ord)], pvs[i].Annotations[nodeAnnotation])
		}
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(f.Namespace), client.MatchingLabels(SelectorLabels(f))); err != nil {
		return Placement{}, nil, fmt.Errorf("list pods: %w", err)
	}
	ready := map[int32]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if o, ok := memberOrdinal(f, pod); ok && pod.DeletionTimestamp == nil && podReady(pod) && pod.Spec.NodeName == current[o] {
			ready[o] = true
		}
	}
	p := Place(PlacementInput{
		Replicas:    replicas(f),
		Current:     current,
		Nodes:       infos,
		Selector:    f.Spec.NodeSelector,
		Tolerations: f.Spec.Tolerations,
		Reassign:    reassign,
		Moving:      moving,
		Parallel:    f.Annotations[flockv1.ReassignParallelAnnotation] == "true",
		NodeLoss:    NodeLossRuleOf(f),
		Now:         now,
		LostSince:   lostSince,
		Ready:       ready,
		DataOn:      dataOn,
	})
	if perr != nil {
		p.Invalid = fmt.Sprintf("annotation %s=%q: %v", flockv1.ReassignAnnotation, f.Annotations[flockv1.ReassignAnnotation], perr)
	}
	return p, hostnames, nil
}

// completeMoves carries out the moves recorded in status (movingFrom): an
// active moving member's claims bound to volumes on another node than its
// new one are deleted (the volumes and the data stay, Released) and its pod
// is deleted unless it already runs on the new node; the StatefulSet then
// recreates both, and the claims bind to the new pre-bound volumes. Only
// claims carrying the Flock's label are deleted.
func (r *Reconciler) completeMoves(ctx context.Context, f *flockv1.Flock, p Placement) error {
	for _, m := range f.Status.Members {
		node, ok := p.Assign[m.Ordinal]
		if m.MovingFrom == "" || !ok || m.Ordinal >= replicas(f) {
			continue
		}
		ord := m.Ordinal
		for _, vol := range localStorage(f).Volumes {
			var pvc corev1.PersistentVolumeClaim
			key := types.NamespacedName{Namespace: f.Namespace, Name: ClaimName(f, vol, ord)}
			if err := r.APIReader.Get(ctx, key, &pvc); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("get claim %s: %w", key.Name, err)
			}
			if pvc.Spec.VolumeName == "" || pvc.Spec.VolumeName == VolumeName(f, vol, ord, node) || pvc.DeletionTimestamp != nil ||
				pvc.Labels[flockv1.FlockLabel] != f.Name {
				continue
			}
			if err := r.checkLeader(ctx); err != nil {
				return err
			}
			if err := r.Client.Delete(ctx, &pvc, client.Preconditions{UID: &pvc.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete claim %s of moved member: %w", key.Name, err)
			}
			log.FromContext(ctx).Info("released claim of moved member", "member", ord, "claim", key.Name, "volume", pvc.Spec.VolumeName, "node", node)
		}
		var pod corev1.Pod
		key := types.NamespacedName{Namespace: f.Namespace, Name: fmt.Sprintf("%s-%d", f.Name, ord)}
		if err := r.Client.Get(ctx, key, &pod); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("get pod %s: %w", key.Name, err)
		}
		if pod.Spec.NodeName == node {
			continue
		}
		// On a lost node no kubelet confirms the deletion: the pod would
		// stay Terminating, and the StatefulSet never makes its successor.
		lost, err := r.nodeLost(ctx, pod.Spec.NodeName)
		if err != nil {
			return err
		}
		if pod.DeletionTimestamp != nil && !lost {
			continue
		}
		if err := r.checkLeader(ctx); err != nil {
			return err
		}
		opts := []client.DeleteOption{client.Preconditions{UID: &pod.UID}}
		if lost {
			opts = append(opts, client.GracePeriodSeconds(0))
		}
		if err := r.Client.Delete(ctx, &pod, opts...); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete pod %s of moved member: %w", key.Name, err)
		}
		log.FromContext(ctx).Info("deleted pod of moved member", "member", ord, "pod", key.Name, "node", node, "from", pod.Spec.NodeName, "nodeLost", lost)
	}
	return nil
}

// nodeLost reports whether node (a pod's) is gone or not Ready.
func (r *Reconciler) nodeLost(ctx context.Context, name string) (bool, error) {
	if name == "" {
		return false, nil
	}
	var n corev1.Node
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("get node %s: %w", name, err)
	}
	return nodeNotReady(&n), nil
}

// pending stops a reconcile that must wait for a change it started; the
// status is left as it is.
type pending struct {
	after time.Duration
	why   string
}

func (p *pending) Error() string { return p.why }

// rebindReleased gives a member its data back when its claim was deleted
// and re-created (a reset, README's reclaim step 1, a re-created namespace
// or Flock, or a move back to a node it left): the member's volume on its
// node is then Released, its claimRef naming the old claim's UID, and the new
// claim would stay Pending forever. The controller clears that UID (the
// volume is pre-bound by name again), so the new claim binds to the old
// data, and says so in an Event. A member starts fresh only on an explicit
// request: deleting its claim and its volume (and the directory).
func (r *Reconciler) rebindReleased(ctx context.Context, f *flockv1.Flock, p Placement, own []corev1.PersistentVolume) error {
	for i := range own {
		pv := &own[i]
		ord, err := strconv.ParseInt(pv.Labels[flockv1.MemberLabel], 10, 32)
		ref := pv.Spec.ClaimRef
		if err != nil || pv.Status.Phase != corev1.VolumeReleased || ref == nil || ref.UID == "" ||
			int32(ord) >= replicas(f) || p.Assign[int32(ord)] != pv.Annotations[nodeAnnotation] {
			continue
		}
		var claim corev1.PersistentVolumeClaim
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &claim); err != nil {
			if apierrors.IsNotFound(err) {
				continue // the StatefulSet creates it with the pod
			}
			return fmt.Errorf("get claim %s: %w", ref.Name, err)
		}
		if claim.UID == ref.UID || claim.Spec.VolumeName != "" || claim.Labels[flockv1.FlockLabel] != f.Name {
			continue
		}
		patch, err := json.Marshal([]map[string]any{
			{"op": "test", "path": "/spec/claimRef/uid", "value": string(ref.UID)},
			{"op": "replace", "path": "/spec/claimRef", "value": map[string]any{
				"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ref.Namespace, "name": ref.Name}},
		})
		if err != nil {
			return fmt.Errorf("encode rebind patch: %w", err)
		}
		if err := r.checkLeader(ctx); err != nil {
			return err
		}
		if err := r.Client.Patch(ctx, pv, client.RawPatch(types.JSONPatchType, patch)); err != nil {
			return fmt.Errorf("rebind released volume %s: %w", pv.Name, err)
		}
		r.Recorder.Eventf(f, nil, corev1.EventTypeNormal, "VolumeRebound", "Reconcile",
			"member %d gets its earlier data back: volume %s on node %s was Released (its claim %s was deleted) and is bound to the new claim; to start the member fresh, delete its claim and this volume", ord, pv.Name, pv.Annotations[nodeAnnotation], ref.Name)
	}
	return nil
}

// consumeReassign removes from the reassign annotation every entry that
// was started or refused, keeping the queued ones, and emits an Event per
// refused entry. It runs after the status recording the started moves is
// written; the JSON patch tests the value it decided from, so an entry
// added meanwhile is never dropped unread.
func (r *Reconciler) consumeReassign(ctx context.Context, f *flockv1.Flock, p Placement) error {
	old, ok := f.Annotations[flockv1.ReassignAnnotation]
	if !ok {
		return nil
	}
	next := FormatReassign(p.Queued)
	if p.Invalid != "" {
		next = ""
	}
	if next == old {
		return nil
	}
	path := "/metadata/annotations/" + strings.ReplaceAll(flockv1.ReassignAnnotation, "/", "~1")
	ops := []map[string]any{{"op": "test", "path": path, "value": old}}
	if next == "" {
		ops = append(ops, map[string]any{"op": "remove", "path": path})
		if _, ok := f.Annotations[flockv1.ReassignParallelAnnotation]; ok {
			ops = append(ops, map[string]any{"op": "remove", "path": "/metadata/annotations/" + strings.ReplaceAll(flockv1.ReassignParallelAnnotation, "/", "~1")})
		}
	} else {
		ops = append(ops, map[string]any{"op": "replace", "path": path, "value": next})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encode reassign patch: %w", err)
	}
	if err := r.Client.Patch(ctx, f, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("consume annotation %s: %w", flockv1.ReassignAnnotation, err)
	}
	if p.Invalid != "" {
		r.Recorder.Eventf(f, nil, corev1.EventTypeWarning, "ReassignRefused", "Reassign", "%s", bounded(p.Invalid))
	}
	for _, o := range sortedKeys(p.Refused) {
		r.Recorder.Eventf(f, nil, corev1.EventTypeWarning, "ReassignRefused", "Reassign", "reassign %d refused: %s", o, p.Refused[o])
	}
	return nil
}
