package peerfinder

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/internal/version"
	"github.com/flockd/flock/peerfinder/config"
)

// TestBuildSourcesRegistersKubeMetricsOnce: both API sources share one set
// of flock_kube_* metrics on the pipeline's registry.
func TestBuildSourcesRegistersKubeMetricsOnce(t *testing.T) {
	cfg := &config.Config{Service: "web", Namespace: "db", Domain: "cluster.local"}
	cfg.Kube.Sources = []string{config.SourceEndpointSlice, config.SourcePods}
	cfg.Kube.Selector = "app=web"
	kc := &kubeClient{}
	kc.once.Do(func() { kc.c = clientset.Wrap(fake.NewClientset()) })
	reg := prometheus.NewPedanticRegistry()
	srcs, err := buildSources(cfg, slog.New(slog.DiscardHandler), reg, kc, nil)
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

// TestBuildInfoMetric: the pipeline's registry serves flock_build_info.
func TestBuildInfoMetric(t *testing.T) {
	cfg, err := config.Parse([]string{"-service=web", "-ns=db", "-domain=cluster.local", "-dns-server=127.0.0.1:53", "-hostname=web-0", "-on-change=true"}, config.Env{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	p, err := build(cfg, newKubeClient(cfg, log), log, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := version.Get()
	want := `# HELP flock_build_info Always 1; labelled with the build's version, commit and Go version.
# TYPE flock_build_info gauge
flock_build_info{commit="` + v.Commit + `",goversion="` + v.GoVersion + `",version="` + v.Version + `"} 1
`
	if err := testutil.GatherAndCompare(p.registry, strings.NewReader(want), "flock_build_info"); err != nil {
		t.Error(err)
	}
}
