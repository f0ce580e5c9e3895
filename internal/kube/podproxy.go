package kube

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
)

// PodProxy reaches an HTTP server in a pod through the API server's
// pods/proxy subresource (RBAC: get pods/proxy): no port of the pod is
// exposed beyond the cluster network, and the caller needs only its
// credentials for the API.
type PodProxy interface {
	// Get sends GET path to port (a number: the API server does not
	// resolve container port names) of pod and returns the body of a 2xx
	// answer. Any other answer is an error from k8s.io/apimachinery's
	// errors package (IsNotFound, IsForbidden, ...) carrying the status
	// and body; ctx bounds the whole request. Safe for concurrent use.
	Get(ctx context.Context, pod string, port int32, path string) ([]byte, error)
}

// restPodProxy is a PodProxy on core/v1's REST client.
type restPodProxy struct {
	core rest.Interface
	ns   string
}

// NewPodProxy returns a PodProxy for pods of namespace ns on core, a REST
// client of core/v1 (Client.PodProxy builds it from the client's config).
func NewPodProxy(core rest.Interface, ns string) PodProxy { return restPodProxy{core: core, ns: ns} }

func (p restPodProxy) Get(ctx context.Context, pod string, port int32, path string) ([]byte, error) {
	b, err := p.core.Get().Namespace(p.ns).Resource("pods").Name(fmt.Sprintf("%s:%d", pod, port)).
		SubResource("proxy").Suffix(path).SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get %s through pods/proxy of %s/%s:%d: %w", path, p.ns, pod, port, err)
	}
	return b, nil
}
