// Package clientset wraps a client-go clientset (real or fake) as a
// kube.Client, for tests and tools that have one. peer-finder itself never
// imports it: the clientset links every built-in API group.
package clientset

import (
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"

	"github.com/flockd/flock/internal/kube"
)

// Wrap returns a kube.Client whose resources are c's typed clients.
func Wrap(c kubernetes.Interface) *kube.Client {
	return &kube.Client{
		Pods: func(ns string) kube.Resource[*corev1.Pod, *corev1.PodList] { return c.CoreV1().Pods(ns) },
		Services: func(ns string) kube.Resource[*corev1.Service, *corev1.ServiceList] {
			return c.CoreV1().Services(ns)
		},
		Claims: func(ns string) kube.Resource[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList] {
			return c.CoreV1().PersistentVolumeClaims(ns)
		},
		EndpointSlices: func(ns string) kube.Resource[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList] {
			return c.DiscoveryV1().EndpointSlices(ns)
		},
		StatefulSets: func(ns string) kube.Resource[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
			return c.AppsV1().StatefulSets(ns)
		},
		Leases: func(ns string) kube.Resource[*coordinationv1.Lease, *coordinationv1.LeaseList] {
			return c.CoordinationV1().Leases(ns)
		},
		Events: func(ns string) kube.Resource[*eventsv1.Event, *eventsv1.EventList] {
			return c.EventsV1().Events(ns)
		},
		AccessReviews: func() kube.Creator[*authorizationv1.SelfSubjectAccessReview] {
			return c.AuthorizationV1().SelfSubjectAccessReviews()
		},
		WatchListUnsupported: watchlist.DoesClientNotSupportWatchListSemantics(c),
	}
}
