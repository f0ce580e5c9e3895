package peerfinder

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/peerfinder/config"
)

// kubeClient builds the Kubernetes client on first use, once, so that the
// API sources, bootstrap safety and diagnose share one client and a
// DNS-only peer-finder never needs a kubeconfig or service account token.
type kubeClient struct {
	opts kube.ClientOptions
	once sync.Once
	c    *kube.Client
	err  error

	metricsOnce sync.Once
	metrics     *kube.Metrics
}

// newKubeClient returns a lazily built client for cfg's -kubeconfig and
// -master (in-cluster config when both are empty). build makes one and
// hands it to every part of the pipeline.
func newKubeClient(cfg *config.Config) *kubeClient {
	return &kubeClient{opts: kube.ClientOptions{Kubeconfig: cfg.Kube.Kubeconfig, Master: cfg.Kube.Master}}
}

// Get returns the client, or the error building it.
func (k *kubeClient) Get() (*kube.Client, error) {
	k.once.Do(func() { k.c, k.err = kube.NewClient(k.opts) })
	return k.c, k.err
}

// Metrics returns the flock_kube_* metrics that every API reader shares
// (the sources and -expect=auto's StatefulSet watch), registered with reg
// on first use.
func (k *kubeClient) Metrics(reg prometheus.Registerer) *kube.Metrics {
	k.metricsOnce.Do(func() { k.metrics = kube.NewMetrics(reg) })
	return k.metrics
}
