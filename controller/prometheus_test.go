package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/internal/testing/grafana"
	"github.com/flockd/flock/localcluster"
)

// TestPrometheusControllerAlertAndDashboard: a Prometheus on the host
// (Debian's, unpacked by make cluster-build) scrapes the controller's
// HTTPS /metrics with the token of a ServiceAccount bound to
// config/rbac/metrics_reader_role.yaml, through config/prometheus/
// scrape.yaml's flock-controller job, and evaluates
// config/prometheus/alerts.yaml (for: shortened to 10s). A NodePinned
// Flock of two members on a pool of one node leaves member 1 waiting (no
// free eligible node): FlockMemberWaiting fires for it, and every
// controller panel of config/grafana/flock-dashboard.json returns series;
// scaled to one member, the alert resolves.
func TestPrometheusControllerAlertAndDashboard(t *testing.T) {
	e := newEnv(t, 1)
	addr := e.startSecureMetrics()

	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(e.metricsToken("prometheus", true)), 0o600); err != nil {
		t.Fatal(err)
	}
	cache, err := localcluster.CacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := localcluster.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prom, err := localcluster.StartFlockPrometheus(ctx, cache, root, dir, token, "10s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)
	// The controller as Kubernetes' pod discovery would show it.
	err = localcluster.WriteTargets(dir, "flock-controller", []localcluster.TargetGroup{{
		Targets: []string{addr},
		Labels: map[string]string{
			"__meta_kubernetes_namespace":                        e.ns,
			"__meta_kubernetes_pod_name":                         "flock-controller-0",
			"__meta_kubernetes_pod_label_app_kubernetes_io_name": "flock-controller",
			"__meta_kubernetes_pod_container_port_name":          "https-metrics",
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.WriteTargets(dir, "flock-peer-finder", nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			targets, _ := prom.Targets(context.Background())
			t.Logf("prometheus targets: %v (log %s)", targets, prom.Log)
		}
	})

	if err := e.cl.Create(context.Background(), e.flock("db", flockv1.ModeNodePinned, 2)); err != nil {
		t.Fatal(err)
	}
	waiting := func(what string, want []string) {
		t.Helper()
		e.c.WaitFor(t, what, 2*deadline, func(ctx context.Context) (bool, error) {
			got, err := prom.Alerts(ctx)
			if err != nil {
				return false, err
			}
			f := localcluster.Firing(got, "FlockMemberWaiting", "member", map[string]string{"namespace": e.ns, "flock": "db"})
			return slices.Equal(f, want), fmt.Errorf("FlockMemberWaiting firing for members %v, want %v", f, want)
		})
		t.Logf("%s: seen through /api/v1/alerts", what)
	}
	waiting("member 1 waits for a node: FlockMemberWaiting fires", []string{"1"})

	queries, err := grafana.Queries(filepath.Join(root, "config", "grafana", "flock-dashboard.json"),
		map[string]string{"namespace": e.ns, "flock": "db", "workload": "none", "datasource": "prometheus"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, q := range queries {
		if !q.Controller() {
			continue // test/realnode's TestPrometheusAlertsAndDashboard
		}
		n++
		e.c.WaitFor(t, "series for panel "+q.Panel, deadline, func(ctx context.Context) (bool, error) {
			s, err := prom.Query(ctx, q.Expr)
			return len(s) > 0, fmt.Errorf("%s: %d series, %v", q.Expr, len(s), err) //nolint:errorlint // a progress note
		})
	}
	if n == 0 {
		t.Error("no controller panel in the dashboard")
	}

	e.scale("db", 1)
	waiting("scaled to one member: FlockMemberWaiting resolved", nil)
}
