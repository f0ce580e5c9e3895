// Package controller reconciles Flocks: a pure Desired computes the
// Service, StatefulSet and node-pinned volumes, the Reconciler applies
// them with server-side apply and writes the status once.
package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
	var f flockv1.Flock
	if err := r.Client.Get(ctx, req.NamespacedName, &f); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if f.DeletionTimestamp != nil {
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
		if o, ok := ordinal(f, pod); ok && pod.DeletionTimestamp == nil && podReady(pod) && pod.Spec.NodeName == current[o] {
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

// CurrentAssignments merges where members' data is (their volumes) with
// the recorded status. The status wins when it records a move under way
// (movingFrom) or names one of the member's volumes' nodes; otherwise the
// volumes win, since the data is there: a bound volume first, then an
// available one, then a released one (a claim deleted or a namespace
// re-created leaves the data on that node, so the member goes back there).
func CurrentAssignments(members []flockv1.MemberStatus, pvs []corev1.PersistentVolume) map[int32]string {
	type candidate struct {
		rank int
		node string
	}
	rank := func(phase corev1.PersistentVolumePhase) int {
		switch phase {
		case corev1.VolumeBound:
			return 0
		case corev1.VolumeReleased, corev1.VolumeFailed:
			return 2
		}
		return 1
	}
	onDisk := map[int32][]candidate{}
	for i := range pvs {
		pv := &pvs[i]
		if pv.DeletionTimestamp != nil {
			continue
		}
		ord, err := strconv.ParseInt(pv.Labels[flockv1.MemberLabel], 10, 32)
		node := pv.Annotations[nodeAnnotation]
		if err != nil || node == "" || ord < 0 {
			continue
		}
		onDisk[int32(ord)] = append(onDisk[int32(ord)], candidate{rank(pv.Status.Phase), node})
	}
	out := map[int32]string{}
	moving := map[int32]bool{}
	for _, m := range members {
		if m.Node != "" {
			out[m.Ordinal] = m.Node
			moving[m.Ordinal] = m.MovingFrom != ""
		}
	}
	for ord, cands := range onDisk {
		if cur, ok := out[ord]; ok && (moving[ord] || slices.ContainsFunc(cands, func(c candidate) bool { return c.node == cur })) {
			continue
		}
		best := slices.MinFunc(cands, func(a, b candidate) int { return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.node, b.node)) })
		out[ord] = best.node
	}
	return out
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

// SetupWithManager registers the controller: Flocks, the objects they own,
// their pods and volumes (by label), and node changes that matter for
// placement.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byFlockLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[flockv1.FlockLabel]
		ns := o.GetNamespace()
		if ns == "" {
			ns = o.GetLabels()[flockv1.NamespaceLabel]
		}
		if name == "" || ns == "" || r.Namespace != "" && ns != r.Namespace {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	})
	allFlocks := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list flockv1.FlockList
		if err := r.Client.List(ctx, &list); err != nil {
			log.FromContext(ctx).Error(err, "list flocks for node event")
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&flockv1.Flock{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.Pod{}, byFlockLabel).
		Watches(&corev1.PersistentVolume{}, byFlockLabel).
		Watches(&corev1.Node{}, allFlocks, builder.WithPredicates(nodePlacementChanged)).
		Complete(r)
}

// nodePlacementChanged passes node events that can change placement:
// creation, deletion, and changes of labels, taints, schedulability or
// readiness (not the frequent status heartbeats).
var nodePlacementChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return o.Spec.Unschedulable != n.Spec.Unschedulable || nodeNotReady(o) != nodeNotReady(n) ||
			!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
			!labels.Equals(o.Labels, n.Labels)
	},
}

// CacheSelectors restrict the manager's cache to the objects of Flocks (all
// carry the flock label), so the controller does not hold every pod,
// volume, service and StatefulSet of the cluster.
func CacheSelectors() map[client.Object]labels.Selector {
	sel := labels.NewSelector()
	req, _ := labels.NewRequirement(flockv1.FlockLabel, selection.Exists, nil)
	sel = sel.Add(*req)
	return map[client.Object]labels.Selector{
		&corev1.Pod{}: sel, &corev1.PersistentVolume{}: sel, &corev1.Service{}: sel, &appsv1.StatefulSet{}: sel,
		&policyv1.PodDisruptionBudget{}: sel,
	}
}
