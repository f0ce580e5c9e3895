package peerfinder

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flockd/flock/peerfinder/config"
)

// TestBuildSourcesRegistersKubeMetricsOnce: both API sources share one set
// of flock_kube_* metrics on the pipeline's registry.
func TestBuildSourcesRegistersKubeMetricsOnce(t *testing.T) {
	cfg := &config.Config{Service: "web", Namespace: "db", Domain: "cluster.local"}
	cfg.Kube.Sources = []string{config.SourceEndpointSlice, config.SourcePods}
	cfg.Kube.Selector = "app=web"
	kc := &kubeClient{}
	kc.once.Do(func() { kc.c = fake.NewClientset() })
	reg := prometheus.NewPedanticRegistry()
	srcs, err := buildSources(cfg, slog.New(slog.DiscardHandler), reg, kc)
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 2 {
		t.Fatalf("%d sources, want 2", len(srcs))
	}
	// Vectors appear in Gather once they have a series: check registration
	// by registering again, which must collide.
	err = reg.Register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flock_kube_relists_total", Help: "x"}, []string{"resource"}))
	if err == nil || !strings.Contains(err.Error(), "previously registered") {
		t.Errorf("flock_kube_relists_total not registered: %v", err)
	}
}
