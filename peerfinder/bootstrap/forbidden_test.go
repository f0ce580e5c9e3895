package bootstrap

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/logtest"
)

// The -expect=auto StatefulSet watch reports a forbidden list like the
// sources do: one record naming the resource, the verb and the fix (and,
// with Metrics, flock_kube_* counts it). Before, its RBAC failures had a
// log line of their own and never reached the metrics (issue 12 #4).
func TestReplicasForbiddenWatchReportedLikeSources(t *testing.T) {
	ss := statefulSet("db", 3)
	c := fake.NewClientset(ss, ownedPod("db-0", ss))
	c.PrependReactor("list", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "",
			errForbiddenDetail)
	})
	logs := logtest.New()
	r := newReplicasForTest(c, logs.Logger())
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx, make(chan int)) }()
	await.Check(t, func() error {
		for _, rec := range logs.Find("kubernetes API forbids reading peers; keeping the last peer set and retrying with backoff") {
			if rec.Attrs["verb"] == "list" && strings.HasPrefix(rec.Attrs["resource"], "statefulsets") {
				return nil
			}
		}
		return fmt.Errorf("logs:\n%s", logs)
	}, "the forbidden StatefulSet list to be reported by the sources' Reporter")
	checkReplicasMetrics(t, r)
	cancel()
	if err := await.Recv(t, errc, "Run to return after cancel"); err != nil {
		t.Fatal(err)
	}
}
