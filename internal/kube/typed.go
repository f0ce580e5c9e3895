package kube

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// typed is a client of one resource with object type *T and list type *L,
// the requests of client-go's generated clients (package gentype) on this
// package's scheme. gentype itself is not used: it links client-go's
// fake-client machinery (client-go/testing and through it the OpenAPI
// models), about 2 MB of binary peer-finder never runs.
type typed[T, L any, PT interface {
	*T
	runtime.Object
	metav1.Object
}, PL interface {
	*L
	runtime.Object
}] struct {
	client    rest.Interface
	resource  string
	namespace string // "" for a cluster-scoped resource
}

// newTyped returns the client of resource (plural, e.g. "pods") in
// namespace ns ("" for a cluster-scoped resource) through c.
func newTyped[T, L any, PT interface {
	*T
	runtime.Object
	metav1.Object
}, PL interface {
	*L
	runtime.Object
}](c rest.Interface, resource, ns string) typed[T, L, PT, PL] {
	return typed[T, L, PT, PL]{client: c, resource: resource, namespace: ns}
}

func (c typed[T, L, PT, PL]) request(r *rest.Request) *rest.Request {
	return r.UseProtobufAsDefaultIfPreferred(true).NamespaceIfScoped(c.namespace, c.namespace != "").Resource(c.resource)
}

func (c typed[T, L, PT, PL]) Get(ctx context.Context, name string, opts metav1.GetOptions) (PT, error) {
	out := PT(new(T))
	err := c.request(c.client.Get()).Name(name).VersionedParams(&opts, paramCodec).Do(ctx).Into(out)
	return out, err
}

func (c typed[T, L, PT, PL]) List(ctx context.Context, opts metav1.ListOptions) (PL, error) {
	out := PL(new(L))
	err := c.request(c.client.Get()).VersionedParams(&opts, paramCodec).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (c typed[T, L, PT, PL]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.request(c.client.Get()).VersionedParams(&opts, paramCodec).Timeout(timeout(opts)).Watch(ctx)
}

func (c typed[T, L, PT, PL]) Create(ctx context.Context, obj PT, opts metav1.CreateOptions) (PT, error) {
	out := PT(new(T))
	err := c.request(c.client.Post()).VersionedParams(&opts, paramCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (c typed[T, L, PT, PL]) Update(ctx context.Context, obj PT, opts metav1.UpdateOptions) (PT, error) {
	out := PT(new(T))
	err := c.request(c.client.Put()).Name(obj.GetName()).VersionedParams(&opts, paramCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (c typed[T, L, PT, PL]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (PT, error) {
	out := PT(new(T))
	err := c.request(c.client.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, paramCodec).Body(data).Do(ctx).Into(out)
	return out, err
}

// timeout is the request timeout a list or watch asks for, 0 for none.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
