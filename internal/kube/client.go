// Package kube holds what flock's Kubernetes API sources share: building a
// client from a kubeconfig, a master URL or the in-cluster config; routing
// client-go's klog output into slog; a ListerWatcher that reports failures
// (RBAC forbidden above all) once instead of every retry; and the informer
// loop that turns a cache of slim objects into complete peer snapshots.
package kube

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// UserAgent is the user agent of peer-finder's API requests, so that
// apiserver audit logs and metrics name it.
const UserAgent = "peer-finder"

// ClientOptions say where the API server is. Both empty means in-cluster.
type ClientOptions struct {
	// Kubeconfig is the path of a kubeconfig file (its current context is used).
	Kubeconfig string
	// Master overrides the server URL of the kubeconfig, or is used alone
	// with no credentials (e.g. through `kubectl proxy`).
	Master string
	// UserAgent defaults to UserAgent.
	UserAgent string
}

// RESTConfig builds the client configuration: from Kubeconfig and/or Master
// when either is set, else from the in-cluster service account.
func RESTConfig(o ClientOptions) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if o.Kubeconfig != "" || o.Master != "" {
		cfg, err = clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client config from -kubeconfig=%q -master=%q: %w", o.Kubeconfig, o.Master, err)
		}
	} else {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster kubernetes config (outside a pod, pass -kubeconfig or -master): %w", err)
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = o.UserAgent
	if cfg.UserAgent == "" {
		cfg.UserAgent = UserAgent
	}
	return cfg, nil
}

// Resource is a typed client of one kind of object T with list type L:
// what peer-finder asks of a resource. client-go's generated clients (e.g.
// clientset.CoreV1().Pods(ns)) implement it.
type Resource[T, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// Creator creates objects of type T, e.g. SelfSubjectAccessReviews.
type Creator[T runtime.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// Client is peer-finder's access to the Kubernetes API: one typed client
// per resource it uses. Every field is set.
//
// NewClient builds it on REST clients whose scheme holds only these
// resources' API groups, instead of client-go's clientset: the clientset's
// scheme registers every built-in API group at init and links their types,
// generated clients, apply configurations and the OpenAPI models (about
// 25 MB of peer-finder's binary, most of its resident memory; see
// bench/README.md). Tests may wrap a clientset (fake or real) with package
// kube/clientset.
type Client struct {
	Pods func(namespace string) Resource[*corev1.Pod, *corev1.PodList]
	// SlimPods reads pods as SlimPods, decoded without whole corev1.Pods:
	// what the pods source caches and the events recorder reads.
	SlimPods       func(namespace string) SlimPodClient
	Services       func(namespace string) Resource[*corev1.Service, *corev1.ServiceList]
	Claims         func(namespace string) Resource[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList]
	EndpointSlices func(namespace string) Resource[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList]
	StatefulSets   func(namespace string) Resource[*appsv1.StatefulSet, *appsv1.StatefulSetList]
	Leases         func(namespace string) Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
	Events         func(namespace string) Resource[*eventsv1.Event, *eventsv1.EventList]
	// Jobs lists batch/v1 Jobs as SlimJobs (-hosts-expect=auto).
	Jobs          func(namespace string) JobLister
	AccessReviews func() Creator[*authorizationv1.SelfSubjectAccessReview]
	// PodProxy reaches pods' HTTP servers through pods/proxy (peer-finder
	// status).
	PodProxy func(namespace string) PodProxy
	// WatchListUnsupported is true for a client that cannot stream lists
	// (client-go's fake clientset): informers then list and watch.
	WatchListUnsupported bool
}

// IsWatchListSemanticsUnSupported is read by client-go's watchlist package.
func (c *Client) IsWatchListSemanticsUnSupported() bool { return c.WatchListUnsupported }

// scheme holds the API groups of Client's resources (and meta/v1's
// unversioned types, as client-go's scheme does).
var (
	scheme     = runtime.NewScheme()
	codecs     = serializer.NewCodecFactory(scheme)
	paramCodec = runtime.NewParameterCodec(scheme)
)

// slimScheme is the scheme of Client.SlimPods and Client.Jobs: core/v1's
// Pod and PodList are SlimPod and SlimPodList there, batch/v1's Job and
// JobList SlimJob and SlimJobList.
var (
	batchV1    = schema.GroupVersion{Group: "batch", Version: "v1"}
	slimScheme = runtime.NewScheme()
	slimCodecs = serializer.NewCodecFactory(slimScheme)
)

func init() {
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(discoveryv1.AddToScheme(scheme))
	utilruntime.Must(appsv1.AddToScheme(scheme))
	utilruntime.Must(coordinationv1.AddToScheme(scheme))
	utilruntime.Must(authorizationv1.AddToScheme(scheme))
	utilruntime.Must(eventsv1.AddToScheme(scheme))
	// batch/v1's list and get options, for paramCodec; its Jobs are
	// slimScheme's SlimJobs.
	metav1.AddToGroupVersion(scheme, batchV1)

	slimScheme.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("Pod"), &SlimPod{})
	slimScheme.AddKnownTypeWithName(batchV1.WithKind("Job"), &SlimJob{})
	slimScheme.AddKnownTypeWithName(batchV1.WithKind("JobList"), &SlimJobList{})
	metav1.AddToGroupVersion(slimScheme, batchV1)
	slimScheme.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("PodList"), &SlimPodList{})
	metav1.AddToGroupVersion(slimScheme, corev1.SchemeGroupVersion)
}

// NewClient returns a Client for o.
func NewClient(o ClientOptions) (*Client, error) {
	cfg, err := RESTConfig(o)
	if err != nil {
		return nil, err
	}
	return NewClientForConfig(cfg)
}

// NewClientForConfig returns a Client for cfg; its REST clients share one
// HTTP client (one connection pool) as a clientset's do.
func NewClientForConfig(cfg *rest.Config) (*Client, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes http client: %w", err)
	}
	// contentType "" lets the typed clients ask for protobuf.
	groupWith := func(gv schema.GroupVersion, scheme *runtime.Scheme, codecs serializer.CodecFactory, contentType string) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.ContentType = contentType
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		if gv.Group == "" {
			c.APIPath = "/api"
		}
		c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, codecs).WithoutConversion()
		r, err := rest.RESTClientForConfigAndClient(c, httpClient)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client for %s: %w", gv, err)
		}
		return r, nil
	}
	group := func(gv schema.GroupVersion) (rest.Interface, error) { return groupWith(gv, scheme, codecs, "") }
	core, err := group(corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	slimCore, err := groupWith(corev1.SchemeGroupVersion, slimScheme, slimCodecs, "")
	if err != nil {
		return nil, err
	}
	disc, err := group(discoveryv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	apps, err := group(appsv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	coord, err := group(coordinationv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	authz, err := group(authorizationv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	// Events in JSON: encoded and decoded by reflection, which every
	// source runs anyway, not by the generated protobuf code of events/v1
	// and core/v1's ObjectReference and EventSource (each first touch of
	// that code maps 64 KiB of the binary; see bench/README.md). A few
	// Events per process, so the speed does not matter.
	evs, err := groupWith(eventsv1.SchemeGroupVersion, scheme, codecs, runtime.ContentTypeJSON)
	if err != nil {
		return nil, err
	}
	// Jobs in JSON: SlimJob has no protobuf decoder (see SlimJob).
	batch, err := groupWith(batchV1, slimScheme, slimCodecs, runtime.ContentTypeJSON)
	if err != nil {
		return nil, err
	}
	return &Client{
		Pods: func(ns string) Resource[*corev1.Pod, *corev1.PodList] {
			return newTyped[corev1.Pod, corev1.PodList](core, "pods", ns)
		},
		SlimPods: func(ns string) SlimPodClient {
			return newTyped[SlimPod, SlimPodList](slimCore, "pods", ns)
		},
		Services: func(ns string) Resource[*corev1.Service, *corev1.ServiceList] {
			return newTyped[corev1.Service, corev1.ServiceList](core, "services", ns)
		},
		Claims: func(ns string) Resource[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList] {
			return newTyped[corev1.PersistentVolumeClaim, corev1.PersistentVolumeClaimList](core, "persistentvolumeclaims", ns)
		},
		EndpointSlices: func(ns string) Resource[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList] {
			return newTyped[discoveryv1.EndpointSlice, discoveryv1.EndpointSliceList](disc, "endpointslices", ns)
		},
		StatefulSets: func(ns string) Resource[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
			return newTyped[appsv1.StatefulSet, appsv1.StatefulSetList](apps, "statefulsets", ns)
		},
		Leases: func(ns string) Resource[*coordinationv1.Lease, *coordinationv1.LeaseList] {
			return newTyped[coordinationv1.Lease, coordinationv1.LeaseList](coord, "leases", ns)
		},
		Events: func(ns string) Resource[*eventsv1.Event, *eventsv1.EventList] {
			return newTyped[eventsv1.Event, eventsv1.EventList](evs, "events", ns)
		},
		Jobs: func(ns string) JobLister {
			return newTyped[SlimJob, SlimJobList](batch, "jobs", ns)
		},
		AccessReviews: func() Creator[*authorizationv1.SelfSubjectAccessReview] {
			// Cluster-scoped and never listed (metav1.List stands for its list type).
			return newTyped[authorizationv1.SelfSubjectAccessReview, metav1.List](authz, "selfsubjectaccessreviews", "")
		},
		PodProxy: func(ns string) PodProxy { return NewPodProxy(core, ns) },
	}, nil
}
