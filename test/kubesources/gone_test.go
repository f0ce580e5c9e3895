package kubesources

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/testing/fixture"
	"github.com/flockd/flock/localcluster/clustertest"
	"github.com/flockd/flock/peerfinder/source/endpointslice"
)

// TestWatchGoneAfterEtcdCompaction gives the endpointslice source a real
// 410 Gone (fault matrix: a real 410): other writes move etcd's revision
// past the watch's resource version, etcd is compacted there, and
// kube-apiserver restarts, so the source's watch resumes from a resource
// version that neither etcd nor the new watch cache has. (A live watch is
// served from the watch cache and survives a compaction; the restart is
// what makes it resume. On this Kubernetes version the fresh watch cache
// alone already answers 410; the compaction makes it so in etcd too.) The
// expiry is counted (reason expired), the source relists, and every set it
// sends is the old one or the new one: never a partial set.
func TestWatchGoneAfterEtcdCompaction(t *testing.T) {
	c := clustertest.Private(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, false)
	fixture.StatefulSet(t, c.Client, ns, 3, fixture.StatefulSetOptions{})
	var logs logBuffer
	metrics := kube.NewMetrics(prometheus.NewPedanticRegistry())
	const res = "endpointslices.discovery.k8s.io"
	kc, err := kube.NewClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	src, err := endpointslice.New(endpointslice.Config{Client: kc, Logger: testLogger(t, &logs), Metrics: metrics,
		Options: endpointslice.Options{Service: "web", Namespace: ns, Domain: c.Domain}})
	if err != nil {
		t.Fatal(err)
	}
	w := run(t, "endpointslice", src)
	w.waitNames(t, "web-0", "web-1", "web-2")
	seen := len(w.Snapshots())

	// Writes elsewhere move the revision past the watch's resource version.
	for i := range 5 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bump-%d", i)}}
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rev := c.CompactEtcd(t)
	t.Logf("etcd compacted at revision %d", rev)
	c.RestartAPIServer(t)
	fixture.Scale(t, c.Client, ns, 4)
	w.waitNames(t, "web-0", "web-1", "web-2", "web-3")

	expired := testutil.ToFloat64(metrics.Failures.WithLabelValues(res, "watch", "expired")) +
		testutil.ToFloat64(metrics.Failures.WithLabelValues(res, "list", "expired"))
	if expired < 1 {
		t.Errorf("flock_kube_list_watch_failures_total{reason=expired} = %v after the compaction, want >= 1 (a 410 Gone)", expired)
	}
	if n := testutil.ToFloat64(metrics.Relists.WithLabelValues(res)); n < 1 {
		t.Errorf("flock_kube_relists_total = %v, want >= 1", n)
	}
	for _, ps := range w.Snapshots()[seen:] {
		if got := strings.Join(names(ps), ","); got != "web-0,web-1,web-2" && got != "web-0,web-1,web-2,web-3" {
			t.Errorf("snapshot %s around the 410, want the old or the new set", got)
		}
	}
	t.Logf("logs:\n%s", strings.Join(logs.lines(""), ""))
}
