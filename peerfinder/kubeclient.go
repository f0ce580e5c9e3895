package peerfinder

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/peerfinder/config"
)

// kubeClient builds the Kubernetes client on first use, once, so that the
// API sources, bootstrap safety, Events and diagnose share one client and a
// DNS-only peer-finder never needs a kubeconfig or service account token.
type kubeClient struct {
	opts kube.ClientOptions
	log  *slog.Logger // client-go's klog output goes here, at debug level
	once sync.Once
	c    *kube.Client
	err  error

	metricsOnce sync.Once
	metrics     *kube.Metrics
}

// newKubeClient returns a lazily built client for cfg's -kubeconfig and
// -master (in-cluster config when both are empty). Main makes one and
// hands it to every part that talks to the API.
func newKubeClient(cfg *config.Config, log *slog.Logger) *kubeClient {
	return &kubeClient{opts: kube.ClientOptions{Kubeconfig: cfg.Kube.Kubeconfig, Master: cfg.Kube.Master}, log: log}
}

// routeKlog: klog's logger is global, so it is routed once per process.
var routeKlog sync.Once

// Get returns the client, or the error building it. The first call routes
// klog to the logger, before client-go runs on another goroutine.
func (k *kubeClient) Get() (*kube.Client, error) {
	k.once.Do(func() {
		routeKlog.Do(func() { kube.RouteKlog(k.log) })
		k.c, k.err = kube.NewClient(k.opts)
	})
	return k.c, k.err
}

// Metrics returns the flock_kube_* metrics that every API reader shares
// (the sources and -expect=auto's StatefulSet watch), registered with reg
// on first use.
func (k *kubeClient) Metrics(reg prometheus.Registerer) *kube.Metrics {
	k.metricsOnce.Do(func() { k.metrics = kube.NewMetrics(reg) })
	return k.metrics
}
