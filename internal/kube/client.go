// Package kube holds what flock's Kubernetes API sources share: building a
// client from a kubeconfig, a master URL or the in-cluster config; routing
// client-go's klog output into slog; a ListerWatcher that reports failures
// (RBAC forbidden above all) once instead of every retry; and the informer
// loop that turns a cache of slim objects into complete peer snapshots.
package kube

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
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

// NewClient returns a clientset for o.
func NewClient(o ClientOptions) (kubernetes.Interface, error) {
	cfg, err := RESTConfig(o)
	if err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}
