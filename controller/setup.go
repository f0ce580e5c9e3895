// Registration of the Reconciler with a controller-runtime manager: what
// it watches and what the cache holds.

package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
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
