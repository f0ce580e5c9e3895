package realnode

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/testing/grafana"
	"github.com/flockd/flock/localcluster"
)

// TestPrometheusAlertsAndDashboard: a Prometheus on the host (Debian's,
// unpacked by make cluster-build) scrapes peer-finder sidecars in real
// pods through config/prometheus/scrape.yaml's job and evaluates
// config/prometheus/alerts.yaml (for: shortened to 10s). With -expect=3
// and two replicas, PeerFinderDeliveryHeldBack and PeerFinderNeverDelivered
// fire for both pods; scaled to three, the hook (test -e /work/ok) fails
// and PeerFinderSinkFailing fires for all three while the held-back alert
// resolves; once /work/ok exists in every pod, the hook succeeds and the
// rest resolve. Then every peer-finder panel of
// config/grafana/flock-dashboard.json returns series for the workload.
func TestPrometheusAlertsAndDashboard(t *testing.T) {
	b := newBed(t)
	cache, err := localcluster.CacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prom, err := localcluster.StartFlockPrometheus(ctx, cache, repoPath(t, ""), dir, "", "10s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			targets, _ := prom.Targets(context.Background())
			t.Logf("prometheus targets: %v (log %s)", targets, prom.Log)
		}
	})

	b.service("pf")
	b.statefulSet("pf", 2, corev1.PodSpec{Containers: []corev1.Container{{
		Name: "peer-finder",
		Args: []string{"-service=pf", "-expect=3", "-metrics-addr=:9090", "-on-change=/bin/test -e /work/ok"},
		// The port scrape.yaml's job keeps.
		Ports: []corev1.ContainerPort{{Name: "flock-metrics", ContainerPort: 9090}},
	}}})
	b.dumpOnFailure("app=pf")

	// What Kubernetes' pod discovery would give, from the pods now.
	refresh := func(ctx context.Context) error {
		pods, err := b.Client.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=pf"})
		if err != nil {
			return err
		}
		return localcluster.WriteTargets(dir, "flock-peer-finder", localcluster.PodTargets(pods.Items))
	}
	// alerts waits until each alert named in want fires for exactly those
	// pods (none: not firing).
	alerts := func(what string, want map[string][]string) {
		t.Helper()
		b.WaitFor(t, what, 4*time.Minute, func(ctx context.Context) (bool, error) {
			if err := refresh(ctx); err != nil {
				return false, err
			}
			got, err := prom.Alerts(ctx)
			if err != nil {
				return false, err
			}
			for name, pods := range want {
				if f := localcluster.Firing(got, name, "pod", map[string]string{"namespace": b.ns}); !slices.Equal(f, pods) {
					return false, fmt.Errorf("%s firing for %v, want %v", name, f, pods)
				}
			}
			return true, nil
		})
		t.Logf("%s: seen through /api/v1/alerts", what)
	}
	alerts("two of three expected members: delivery held back, never delivered", map[string][]string{
		"PeerFinderDeliveryHeldBack": {"pf-0", "pf-1"},
		"PeerFinderNeverDelivered":   {"pf-0", "pf-1"},
		"PeerFinderSinkFailing":      nil,
	})
	b.scale("pf", 3)
	alerts("three members: the hook fails everywhere, nothing held back", map[string][]string{
		"PeerFinderDeliveryHeldBack": nil,
		"PeerFinderSinkFailing":      {"pf-0", "pf-1", "pf-2"},
		"PeerFinderNeverDelivered":   {"pf-0", "pf-1", "pf-2"},
	})
	for _, p := range []string{"pf-0", "pf-1", "pf-2"} {
		if out, err := b.exec(p, "peer-finder", "touch", "/work/ok"); err != nil {
			t.Fatalf("touch /work/ok in %s: %v: %s", p, err, out)
		}
	}
	alerts("the hook's cause fixed: every alert resolved", map[string][]string{
		"PeerFinderDeliveryHeldBack": nil,
		"PeerFinderSinkFailing":      nil,
		"PeerFinderNeverDelivered":   nil,
	})

	queries, err := grafana.Queries(repoPath(t, "config/grafana/flock-dashboard.json"),
		map[string]string{"namespace": b.ns, "workload": "pf", "flock": "none", "datasource": "prometheus"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, q := range queries {
		if q.Controller() {
			continue // TestPrometheusControllerAlertAndDashboard
		}
		n++
		b.WaitFor(t, "series for panel "+q.Panel, time.Minute, func(ctx context.Context) (bool, error) {
			s, err := prom.Query(ctx, q.Expr)
			return len(s) > 0, fmt.Errorf("%s: %d series, %v", q.Expr, len(s), err) //nolint:errorlint // a progress note
		})
	}
	if n == 0 {
		t.Error("no peer-finder panel in the dashboard")
	}
}
