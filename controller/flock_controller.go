// Package controller reconciles Flocks. Decisions are pure functions:
// Desired (desired.go) computes the Service, StatefulSet and node-pinned
// volumes, Place (placement.go) where each member lives, and status.go the
// status. The Reconciler (this file) reads what they decide from and
// carries the decisions out: moves.go the placement (volumes, moves,
// reassignments), apply.go the writes (server-side apply, the status once
// per reconcile), setup.go its registration with the manager.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
)

// FieldOwner is the field manager of everything the controller applies.
const FieldOwner = "flock-controller"

// defaultClassAnnotation marks the cluster's default StorageClass.
const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// EventRecorder emits Kubernetes Events (satisfied by the manager's
// events.k8s.io recorder).
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Reconciler reconciles Flocks.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads directly from the API server, for objects the
	// controller does not cache (StorageClasses, claims).
	APIReader client.Reader
	// Recorder emits Events on Flocks.
	Recorder EventRecorder
	// Namespace, if set, is the only namespace whose Flocks are reconciled.
	Namespace string
	// Leader, if set, returns an error unless this process leads now (see
	// LeaderCheck); it runs right before each destructive step.
	Leader func(context.Context) error
	// AllowedStoragePaths, if not nil, are the host directories a
	// NodePinned Flock's storage.local.path must be in (or equal); a Flock
	// outside them is refused (StoragePathNotAllowed).
	AllowedStoragePaths []string
	// Metrics, if set, export the members of each status written.
	Metrics *MemberMetrics
	// Reconciled, if set, is called when a reconcile of a Flock returns,
	// with the time it started (before it read anything): one that started
	// after the cache held a change has looked at that change. Called from
	// the controller's workers; never concurrently for one Flock.
	Reconciled func(flock types.NamespacedName, started time.Time)
}

// checkLeader runs r.Leader, if set.
func (r *Reconciler) checkLeader(ctx context.Context) error {
	if r.Leader == nil {
		return nil
	}
	return r.Leader(ctx)
}

// conflictRetry is how soon a status write that lost a race is retried.
const conflictRetry = 200 * time.Millisecond

// refusalRetry is how soon a refused Flock (see Refusal) is looked at again
// without any change to it.
const refusalRetry = 30 * time.Second

// Each verb is used (TestMain checks it against the requests the tests'
// controllers make): flocks are read through the cache (list, watch) and
// patched only to consume the flockd.io/reassign annotation; status is
// written with update.
// +kubebuilder:rbac:groups=flockd.io,resources=flocks,verbs=list;watch;patch
// +kubebuilder:rbac:groups=flockd.io,resources=flocks/status,verbs=update
// Owner references with blockOwnerDeletion need update on the owner's
// finalizers where the OwnerReferencesPermissionEnforcement admission plugin
// is on (not on the local cluster, so no test can show it).
// +kubebuilder:rbac:groups=flockd.io,resources=flocks/finalizers,verbs=update
// Deleting a StatefulSet (orphaning its pods) only replaces one whose
// immutable podManagementPolicy is not the Flock's; get reads one the cache
// does not hold (unlabelled, to refuse it).
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch;delete
// PodDisruptionBudgets: the one of spec.podDisruptionBudget, deleted when
// the field is removed; get reads one the cache does not hold, to refuse it.
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// persistentvolumes patch: server-side apply, and rebinding a Released volume.
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch;create;patch
// Deleting claims and pods is only done for an explicit reassignment
// (the flockd.io/reassign annotation); volumes are never deleted.
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=list
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// Secure metrics (-metrics-secure): the token of each client is reviewed
// and its access to /metrics checked with the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Reconcile brings one Flock's objects to the desired state and records
// the status. It is level-based: it reads everything it decides from, so a
// restart at any point resumes correctly.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.Reconciled != nil {
		defer r.Reconciled(req.NamespacedName, time.Now())
	}
	var f flockv1.Flock
	if err := r.Client.Get(ctx, req.NamespacedName, &f); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.Forget(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if f.DeletionTimestamp != nil {
		r.Metrics.Forget(f.Namespace, f.Name)
		return ctrl.Result{}, nil
	}
	obs, err := r.reconcile(ctx, &f)
	var wait *pending
	if errors.As(err, &wait) {
		log.FromContext(ctx).V(1).Info("waiting", "why", wait.why)
		return ctrl.Result{RequeueAfter: wait.after}, nil
	}
	if err != nil {
		// The last good status stays; only the Degraded condition says what failed.
		reason := "ReconcileError"
		var ref *Refusal
		if errors.As(err, &ref) {
			reason = ref.Reason
		}
		r.Recorder.Eventf(&f, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", bounded(err.Error()))
		if serr := r.updateStatus(ctx, &f, ErrorStatus(f.Status, f.Generation, err)); serr != nil {
			return ctrl.Result{}, errors.Join(err, serr)
		}
		if ref != nil {
			// Not a failure to retry fast: look again later (and on any change).
			return ctrl.Result{RequeueAfter: refusalRetry}, nil
		}
		return ctrl.Result{}, err
	}
	if serr := r.writeStatus(ctx, &f, obs); serr != nil {
		if apierrors.IsConflict(serr) {
			// The cache lagged behind a write; retry with fresh data, quietly.
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, serr
	}
	if err := r.consumeReassign(ctx, &f, obs.Placement); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
			// The annotation changed meanwhile (the patch's test failed): decide again.
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	if d := obs.Placement.Recheck; d > 0 {
		// A member waiting for a lost node may move then (spec.nodeLoss).
		return ctrl.Result{RequeueAfter: d + time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// reconcile applies the desired objects and returns what it observed.
func (r *Reconciler) reconcile(ctx context.Context, f *flockv1.Flock) (Observed, error) {
	obs := Observed{Flock: f, Now: time.Now()}
	mode, err := r.mode(ctx, f)
	if err != nil {
		return obs, err
	}
	obs.Mode = mode
	if mode == flockv1.ModeNodePinned {
		// Before anything is placed or made: no volume outside the allowed directories.
		if ref := StoragePathAllowed(localStorage(f).Path, r.AllowedStoragePaths); ref != nil {
			return obs, ref
		}
	}
	in := DesiredInput{Flock: f, Mode: mode}
	if mode == flockv1.ModeNodePinned {
		p, hostnames, err := r.place(ctx, f, obs.Now)
		if err != nil {
			return obs, err
		}
		obs.Placement, obs.Hostnames = p, hostnames
		in.Assign, in.Hostnames = p.Assign, hostnames
	} else if v, ok := f.Annotations[flockv1.ReassignAnnotation]; ok {
		obs.Placement.Invalid = fmt.Sprintf("annotation %s=%q: members move only in NodePinned mode (mode %s)", flockv1.ReassignAnnotation, v, mode)
	}
	objs, err := Desired(in)
	if err != nil {
		return obs, err
	}
	var own []corev1.PersistentVolume
	if mode == flockv1.ModeNodePinned {
		var all corev1.PersistentVolumeList
		if err := r.Client.List(ctx, &all, client.HasLabels{flockv1.FlockLabel}); err != nil {
			return obs, fmt.Errorf("list persistentvolumes: %w", err)
		}
		if ref := StorageOverlap(f, FlockDir(f), all.Items); ref != nil {
			return obs, ref
		}
		for i := range all.Items {
			if ownsVolume(f, &all.Items[i]) {
				own = append(own, all.Items[i])
			}
		}
	}
	if err := r.checkOwnership(ctx, f, objs, own); err != nil {
		return obs, err
	}
	if err := r.replaceStatefulSetForPolicy(ctx, f); err != nil {
		return obs, err
	}
	if err := r.removeDisruptionBudget(ctx, f); err != nil {
		return obs, err
	}
	for _, o := range objs {
		if err := r.apply(ctx, o); err != nil {
			return obs, err
		}
	}
	if mode == flockv1.ModeNodePinned {
		if err := r.completeMoves(ctx, f, obs.Placement); err != nil {
			return obs, err
		}
		if err := r.rebindReleased(ctx, f, obs.Placement, own); err != nil {
			return obs, err
		}
		obs.Volumes = own
	}
	var sts appsv1.StatefulSet
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(f), &sts); {
	case err == nil:
		obs.StatefulSet = &sts
	case !apierrors.IsNotFound(err):
		return obs, fmt.Errorf("get statefulset: %w", err)
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(f.Namespace), client.MatchingLabels(SelectorLabels(f))); err != nil {
		return obs, fmt.Errorf("list pods: %w", err)
	}
	obs.Pods = pods.Items
	return obs, nil
}

// mode resolves the storage mode once: a recorded mode is kept; Auto
// becomes NodePinned when the Flock has no volumeClaimTemplates (network
// storage would have no claims to give) or already has local volumes,
// else NetworkStorage when the cluster has a default StorageClass.
func (r *Reconciler) mode(ctx context.Context, f *flockv1.Flock) (flockv1.Mode, error) {
	if f.Status.Mode != "" && f.Status.Mode != flockv1.ModeAuto {
		return f.Status.Mode, nil
	}
	if f.Spec.Mode == flockv1.ModeNetworkStorage || f.Spec.Mode == flockv1.ModeNodePinned {
		return f.Spec.Mode, nil
	}
	if len(f.Spec.Storage.VolumeClaimTemplates) == 0 {
		return flockv1.ModeNodePinned, nil
	}
	pvs, err := r.volumes(ctx, f)
	if err != nil {
		return "", err
	}
	if len(pvs) > 0 {
		return flockv1.ModeNodePinned, nil
	}
	var classes storagev1.StorageClassList
	if err := r.APIReader.List(ctx, &classes); err != nil {
		return "", fmt.Errorf("list storageclasses: %w", err)
	}
	if slices.ContainsFunc(classes.Items, func(c storagev1.StorageClass) bool {
		return c.Annotations[defaultClassAnnotation] == "true"
	}) {
		return flockv1.ModeNetworkStorage, nil
	}
	return flockv1.ModeNodePinned, nil
}
