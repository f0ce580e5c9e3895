package controller

import (
	"context"
	"fmt"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
)

// Refusal is a reconcile stopped on purpose, not a failure to retry fast:
// the controller does not touch an object it does not own, nor a storage
// directory another Flock uses. Reason is the Degraded condition's reason
// and the Event's.
type Refusal struct {
	Reason  string
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Refusal reasons.
const (
	RefusedServiceNotOwned     = "ServiceNotOwned"
	RefusedStatefulSetNotOwned = "StatefulSetNotOwned"
	RefusedVolumeNotOwned      = "VolumeNotOwned"
	RefusedClaimNotOwned       = "ClaimNotOwned"
	RefusedStoragePathOverlap  = "StoragePathOverlap"
	RefusedBudgetNotOwned      = "PodDisruptionBudgetNotOwned"
	RefusedStoragePathDenied   = "StoragePathNotAllowed"
)

// StoragePathAllowed returns a refusal unless path (clean and absolute, as
// the CRD validates it) is one of the allowed directories or below one.
// A nil allow list allows every path. It is pure.
func StoragePathAllowed(p string, allow []string) *Refusal {
	if allow == nil {
		return nil
	}
	for _, a := range allow {
		if a = strings.TrimSuffix(a, "/"); p == a || strings.HasPrefix(p, a+"/") {
			return nil
		}
	}
	return &Refusal{RefusedStoragePathDenied, fmt.Sprintf("storage.local.path %s is outside the directories the administrator allows (%s): the controller creates no volume there",
		p, strings.Join(allow, ", "))}
}

// ownsVolume reports whether pv carries f's labels.
func ownsVolume(f *flockv1.Flock, pv *corev1.PersistentVolume) bool {
	return pv.Labels[flockv1.FlockLabel] == f.Name && pv.Labels[flockv1.NamespaceLabel] == f.Namespace
}

// checkOwnership refuses to apply objs when one of them already exists and
// is not the Flock's: a Service or StatefulSet without the Flock as its
// controller, a PersistentVolume without the Flock's labels, or (for a
// volume not yet bound) a claim it is pre-bound to that the Flock's
// StatefulSet did not create. own are the Flock's volumes (from the cache).
func (r *Reconciler) checkOwnership(ctx context.Context, f *flockv1.Flock, objs []client.Object, own []corev1.PersistentVolume) error {
	bound := map[string]bool{}
	for i := range own {
		bound[own[i].Name] = own[i].Status.Phase == corev1.VolumeBound
	}
	for _, o := range objs {
		key := client.ObjectKeyFromObject(o)
		switch o := o.(type) {
		case *corev1.Service:
			var live corev1.Service
			if err := r.live(ctx, key, &live); err != nil {
				return err
			}
			if live.UID != "" && !metav1.IsControlledBy(&live, f) {
				return &Refusal{RefusedServiceNotOwned, fmt.Sprintf("Service %s exists and is not controlled by this Flock: the controller leaves it alone (delete it, or set another spec.serviceName on a new Flock)", key.Name)}
			}
		case *appsv1.StatefulSet:
			var live appsv1.StatefulSet
			if err := r.live(ctx, key, &live); err != nil {
				return err
			}
			if live.UID != "" && !metav1.IsControlledBy(&live, f) {
				return &Refusal{RefusedStatefulSetNotOwned, fmt.Sprintf("StatefulSet %s exists and is not controlled by this Flock: the controller leaves it alone", key.Name)}
			}
		case *policyv1.PodDisruptionBudget:
			var live policyv1.PodDisruptionBudget
			if err := r.live(ctx, key, &live); err != nil {
				return err
			}
			if live.UID != "" && !metav1.IsControlledBy(&live, f) {
				return &Refusal{RefusedBudgetNotOwned, fmt.Sprintf("PodDisruptionBudget %s exists and is not controlled by this Flock: the controller leaves it alone (delete it, or remove spec.podDisruptionBudget)", key.Name)}
			}
		case *corev1.PersistentVolume:
			if _, ok := bound[o.Name]; !ok {
				var live corev1.PersistentVolume
				if err := r.live(ctx, key, &live); err != nil {
					return err
				}
				if live.UID != "" && !ownsVolume(f, &live) {
					return &Refusal{RefusedVolumeNotOwned, fmt.Sprintf("PersistentVolume %s exists and does not carry this Flock's labels: the controller leaves it alone", key.Name)}
				}
			}
			if bound[o.Name] || o.Spec.ClaimRef == nil {
				continue
			}
			var claim corev1.PersistentVolumeClaim
			ckey := client.ObjectKey{Namespace: o.Spec.ClaimRef.Namespace, Name: o.Spec.ClaimRef.Name}
			if err := r.APIReader.Get(ctx, ckey, &claim); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("get claim %s: %w", ckey.Name, err)
			}
			if claim.Labels[flockv1.FlockLabel] != f.Name {
				return &Refusal{RefusedClaimNotOwned, fmt.Sprintf("PersistentVolumeClaim %s exists and was not made by this Flock (no %s=%s label): the controller does not bind a member's volume to it", ckey.Name, flockv1.FlockLabel, f.Name)}
			}
		}
	}
	return nil
}

// live reads key from the cache (which holds only the Flock-labelled
// objects) and, when not there, from the API server; obj keeps an empty UID
// when it does not exist.
func (r *Reconciler) live(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	err := r.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, obj)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get %T %s: %w", obj, key.Name, err)
	}
	return nil
}

// FlockDir is the directory holding all of a NodePinned Flock's member
// directories on a node.
func FlockDir(f *flockv1.Flock) string {
	return path.Join(localStorage(f).Path, f.Namespace, f.Name)
}

// volumePath is the host path of a node-local volume, "" for other kinds.
func volumePath(pv *corev1.PersistentVolume) string {
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path
	}
	return ""
}

// dirsOverlap reports whether one of two clean absolute directories is, or
// lies inside, the other.
func dirsOverlap(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// StorageOverlap returns a refusal when f's directory (dir) overlaps the
// directory of another Flock's volume among pvs, unless f already had
// volumes there before that one was made (the first Flock keeps working; the
// later one is refused). It is pure.
func StorageOverlap(f *flockv1.Flock, dir string, pvs []corev1.PersistentVolume) *Refusal {
	var oldest *metav1.Time
	for i := range pvs {
		if ownsVolume(f, &pvs[i]) && (oldest == nil || pvs[i].CreationTimestamp.Before(oldest)) {
			oldest = &pvs[i].CreationTimestamp
		}
	}
	for i := range pvs {
		pv := &pvs[i]
		p := volumePath(pv)
		if ownsVolume(f, pv) || p == "" || pv.Labels[flockv1.FlockLabel] == "" {
			continue
		}
		if !dirsOverlap(dir, path.Dir(p)) && !dirsOverlap(dir, p) {
			continue
		}
		if oldest != nil && oldest.Before(&pv.CreationTimestamp) {
			continue
		}
		return &Refusal{RefusedStoragePathOverlap, fmt.Sprintf("storage directory %s overlaps %s of Flock %s/%s (volume %s): choose another storage.local.path",
			dir, p, pv.Labels[flockv1.NamespaceLabel], pv.Labels[flockv1.FlockLabel], pv.Name)}
	}
	return nil
}
