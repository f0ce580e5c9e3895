package bootstrap

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/kubernetes"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/kube/clientset"
)

var errForbiddenDetail = errors.New(`User "system:serviceaccount:ns:db" cannot list resource "statefulsets" in API group "apps" in the namespace "ns"`)

func newReplicasForTest(c kubernetes.Interface, log *slog.Logger) *Replicas {
	return &Replicas{Client: clientset.Wrap(c), Namespace: "ns", Pod: "db-0", Logger: log, Metrics: kube.NewMetrics(nil)}
}

func checkReplicasMetrics(t *testing.T, r *Replicas) {
	t.Helper()
	if n := testutil.ToFloat64(r.Metrics.Failures.WithLabelValues("statefulsets.apps", "list", "forbidden")); n < 1 {
		t.Errorf("flock_kube_list_watch_failures_total{resource=statefulsets.apps,verb=list,reason=forbidden} = %v, want >= 1", n)
	}
}
