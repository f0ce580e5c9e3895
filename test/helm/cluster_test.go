package helm

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/localcluster"
	"github.com/flockd/flock/localcluster/clustertest"
)

// TestInstallTestUpgradeUninstall runs the chart's life on the local
// cluster's real nodes, with the images make images loaded there (:dev):
// helm install (namespaced scope: other tests run controllers of their own
// on this cluster, each watching only its namespace; the leader election
// Lease is in the release's namespace) brings one Ready replica holding the
// Lease and serves the Flock CRD; helm test's pod gets ok from /healthz and
// /readyz through the controller's Service, whose metrics port speaks HTTPS;
// the Service's endpoint serves /metrics to a token bound to the chart's
// metrics reader ClusterRole and refuses one without a token; helm upgrade
// to two replicas, a PodDisruptionBudget and -log-level=debug takes effect;
// helm uninstall removes every object of the release, cluster-scoped ones
// included, and leaves the CRD (Helm never deletes a chart's crds/).
func TestInstallTestUpgradeUninstall(t *testing.T) {
	c := clustertest.Get(t)
	c.NeedRealNode(t)
	ns := c.Namespace(t)
	// Cluster-scoped objects are named after the release: unique per test.
	release := "flock-controller-" + ns[len(ns)-5:]
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`scope: namespace
replicas: 1
image:
  tag: dev
test:
  image:
    tag: dev
nodeSelector:
  `+localcluster.RealNodeLabel+`: "true"
tolerations:
- key: `+localcluster.RealNodeLabel+`
  operator: Equal
  value: "true"
  effect: NoSchedule
`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	ctx := context.Background()
	clusterScoped := []string{release + "-cluster", release + "-metrics-reader"}
	t.Cleanup(func() {
		// After a failure before uninstall: what is not in the namespace.
		if _, err := helm(t, "uninstall", release, "--namespace", ns, "--ignore-not-found", "--wait"); err != nil {
			t.Log(err)
		}
		for _, n := range clusterScoped {
			_ = c.Client.RbacV1().ClusterRoles().Delete(context.Background(), n, metav1.DeleteOptions{})
			_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})

	mustHelm(t, "install", release, chart, "--namespace", ns, "--values", values, "--wait", "--timeout", "5m")
	pods := func(n int, check func(args []string) bool) {
		t.Helper()
		c.WaitFor(t, "controller pods Ready on real nodes", 3*time.Minute, func(ctx context.Context) (bool, error) {
			l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release + ",app.kubernetes.io/name=flock-controller"})
			if err != nil {
				return false, err
			}
			ready := 0
			for _, p := range l.Items {
				if p.DeletionTimestamp != nil {
					continue
				}
				if !strings.HasPrefix(p.Spec.NodeName, "real-") || !clustertest.PodReady(&p) || !check(p.Spec.Containers[0].Args) {
					return false, nil
				}
				ready++
			}
			return ready == n, nil
		})
	}
	pods(1, func(args []string) bool { return slices.Contains(args, "-namespace=$(POD_NAMESPACE)") })
	c.WaitFor(t, "the leader election Lease held in "+ns, 2*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoordinationV1().Leases(ns).Get(ctx, "flock-controller.flockd.io", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && strings.HasPrefix(ptr.Deref(l.Spec.HolderIdentity, ""), release), err
	})
	if _, err := c.Client.Discovery().ServerResourcesForGroupVersion("flockd.io/v1alpha1"); err != nil {
		t.Fatalf("the Flock CRD is not served after helm install: %v", err)
	}

	out := mustHelm(t, "test", release, "--namespace", ns, "--logs", "--timeout", "3m")
	for _, want := range []string{"ok: http://" + release + ":8081/healthz", "ok: http://" + release + ":8081/readyz", "ok: http://" + release + ":8443/metrics: HTTPS only"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm test: no %q from the test pod:\n%s", want, out)
		}
	}
	scrapeMetrics(t, c, ns, release)

	mustHelm(t, "upgrade", release, chart, "--namespace", ns, "--values", values, "--wait", "--timeout", "5m",
		"--set", "replicas=2", "--set", "podDisruptionBudget.enabled=true", "--set", "extraArgs={-log-level=debug}")
	pods(2, func(args []string) bool { return slices.Contains(args, "-log-level=debug") })
	c.WaitFor(t, "the PodDisruptionBudget allowing one disruption", time.Minute, func(ctx context.Context) (bool, error) {
		p, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, release, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && p.Status.ExpectedPods == 2 && p.Status.DisruptionsAllowed == 1, err
	})

	mustHelm(t, "uninstall", release, "--namespace", ns, "--wait", "--timeout", "3m")
	for _, n := range clusterScoped {
		if _, err := c.Client.RbacV1().ClusterRoles().Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ClusterRole %s after helm uninstall: %v; want it deleted", n, err)
		}
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Get(ctx, release+"-cluster", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRoleBinding %s-cluster after helm uninstall: %v; want it deleted", release, err)
	}
	for what, err := range map[string]error{
		"Deployment":          get(c.Client.AppsV1().Deployments(ns).Get(ctx, release, metav1.GetOptions{})),
		"Service":             get(c.Client.CoreV1().Services(ns).Get(ctx, release, metav1.GetOptions{})),
		"ServiceAccount":      get(c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, release, metav1.GetOptions{})),
		"Role":                get(c.Client.RbacV1().Roles(ns).Get(ctx, release, metav1.GetOptions{})),
		"PodDisruptionBudget": get(c.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, release, metav1.GetOptions{})),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after helm uninstall: %v; want it deleted", what, err)
		}
	}
	if _, err := c.Client.Discovery().ServerResourcesForGroupVersion("flockd.io/v1alpha1"); err != nil {
		t.Errorf("the Flock CRD after helm uninstall: %v; want it kept", err)
	}
}

// get keeps a Get's error.
func get[T any](_ T, err error) error { return err }

// scrapeMetrics reads /metrics from the endpoint of the release's Service
// over HTTPS: with the token of a ServiceAccount bound to the chart's
// metrics reader ClusterRole it gets flock_build_info, without a token 401.
func scrapeMetrics(t *testing.T, c *clustertest.Cluster, ns, release string) {
	t.Helper()
	ctx := context.Background()
	token := c.MetricsToken(t, ns, release+"-metrics-reader")
	var addr string
	c.WaitFor(t, "a ready endpoint of Service "+release, time.Minute, func(ctx context.Context) (bool, error) {
		l, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + release})
		if err != nil {
			return false, err
		}
		for _, es := range l.Items {
			for _, p := range es.Ports {
				if ptr.Deref(p.Name, "") != "https-metrics" {
					continue
				}
				for _, e := range es.Endpoints {
					if ptr.Deref(e.Conditions.Ready, false) && len(e.Addresses) > 0 {
						addr = net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(ptr.Deref(p.Port, 0))))
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	c.WaitFor(t, "/metrics over HTTPS with the scraper's token", time.Minute, func(ctx context.Context) (bool, error) {
		code, body, err := clustertest.GetMetrics(ctx, addr, token)
		return err == nil && code == http.StatusOK && strings.Contains(body, "flock_build_info{"), nil
	})
	if code, _, err := clustertest.GetMetrics(ctx, addr, ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: status %d, %v; want 401", code, err)
	}
}
