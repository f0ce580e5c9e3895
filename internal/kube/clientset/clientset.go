// Package clientset wraps a client-go clientset (real or fake) as a
// kube.Client, for tests and tools that have one. peer-finder itself never
// imports it: the clientset links every built-in API group.
package clientset

import (
	"context"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"
	"k8s.io/client-go/util/watchlist"

	"github.com/flockd/flock/internal/kube"
)

// Wrap returns a kube.Client whose resources are c's typed clients.
func Wrap(c kubernetes.Interface) *kube.Client {
	return &kube.Client{
		Pods: func(ns string) kube.Resource[*corev1.Pod, *corev1.PodList] { return c.CoreV1().Pods(ns) },
		SlimPods: func(ns string) kube.SlimPodClient {
			return slimPods{c.CoreV1().Pods(ns)}
		},
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
		Jobs: func(ns string) kube.JobLister { return slimJobs{c.BatchV1().Jobs(ns)} },
		AccessReviews: func() kube.Creator[*authorizationv1.SelfSubjectAccessReview] {
			return c.AuthorizationV1().SelfSubjectAccessReviews()
		},
		// A fake clientset has no REST client: its PodProxy must not be used.
		PodProxy:             func(ns string) kube.PodProxy { return kube.NewPodProxy(c.CoreV1().RESTClient(), ns) },
		WatchListUnsupported: watchlist.DoesClientNotSupportWatchListSemantics(c),
	}
}

// slimPods reads a clientset's pods as kube.SlimPods.
type slimPods struct {
	pods kube.Resource[*corev1.Pod, *corev1.PodList]
}

func (s slimPods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*kube.SlimPod, error) {
	p, err := s.pods.Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return SlimPodFrom(p), nil
}

func (s slimPods) List(ctx context.Context, opts metav1.ListOptions) (*kube.SlimPodList, error) {
	l, err := s.pods.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &kube.SlimPodList{TypeMeta: l.TypeMeta, ListMeta: l.ListMeta, Items: make([]kube.SlimPod, len(l.Items))}
	for i := range l.Items {
		out.Items[i] = *SlimPodFrom(&l.Items[i])
	}
	return out, nil
}

func (s slimPods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := s.pods.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if p, ok := e.Object.(*corev1.Pod); ok {
			e.Object = SlimPodFrom(p)
		}
		return e, true
	}), nil
}

// SlimPodFrom returns the fields of p that a kube.SlimPod holds (decoded
// from protobuf: see its doc).
func SlimPodFrom(p *corev1.Pod) *kube.SlimPod {
	s := &kube.SlimPod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, GenerateName: p.GenerateName, Namespace: p.Namespace, UID: p.UID,
			ResourceVersion: p.ResourceVersion, Generation: p.Generation,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp.DeepCopy(),
			Labels: maps.Clone(p.Labels), Annotations: maps.Clone(p.Annotations),
			OwnerReferences: slices.Clone(p.OwnerReferences),
		},
		Spec:   kube.SlimPodSpec{NodeName: p.Spec.NodeName, Hostname: p.Spec.Hostname, Subdomain: p.Spec.Subdomain},
		Status: kube.SlimPodStatus{Phase: string(p.Status.Phase), PodIP: p.Status.PodIP},
	}
	for _, c := range p.Spec.Containers {
		var sc kube.SlimContainer
		for _, port := range c.Ports {
			sc.Ports = append(sc.Ports, kube.SlimContainerPort{Name: port.Name, ContainerPort: port.ContainerPort, Protocol: string(port.Protocol)})
		}
		for k, q := range c.Resources.Requests {
			if sc.Resources.Requests == nil {
				sc.Resources.Requests = map[string]string{}
			}
			sc.Resources.Requests[string(k)] = q.String()
		}
		s.Spec.Containers = append(s.Spec.Containers, sc)
	}
	for _, c := range p.Status.Conditions {
		s.Status.Conditions = append(s.Status.Conditions, kube.SlimPodCondition{Type: string(c.Type), Status: string(c.Status)})
	}
	for _, ip := range p.Status.PodIPs {
		s.Status.PodIPs = append(s.Status.PodIPs, kube.SlimPodIP{IP: ip.IP})
	}
	return s
}

// slimJobs lists a clientset's Jobs as kube.SlimJobs.
type slimJobs struct{ jobs batchclient.JobInterface }

func (s slimJobs) List(ctx context.Context, opts metav1.ListOptions) (*kube.SlimJobList, error) {
	l, err := s.jobs.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &kube.SlimJobList{TypeMeta: l.TypeMeta, ListMeta: l.ListMeta, Items: make([]kube.SlimJob, len(l.Items))}
	for i := range l.Items {
		out.Items[i] = *SlimJobFrom(&l.Items[i])
	}
	return out, nil
}

// SlimJobFrom returns the fields of j that a kube.SlimJob holds.
func SlimJobFrom(j *batchv1.Job) *kube.SlimJob {
	s := &kube.SlimJob{TypeMeta: j.TypeMeta, Spec: kube.SlimJobSpec{
		Completions: j.Spec.Completions,
		Template:    kube.SlimJobPodTemplate{Metadata: kube.SlimJobTemplateMeta{Labels: maps.Clone(j.Spec.Template.Labels)}},
	}}
	j.ObjectMeta.DeepCopyInto(&s.ObjectMeta)
	if j.Spec.CompletionMode != nil {
		s.Spec.CompletionMode = string(*j.Spec.CompletionMode)
	}
	return s
}
