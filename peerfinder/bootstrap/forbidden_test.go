package bootstrap

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/syncbuf"
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
	logs := &syncbuf.Buffer{}
	r := newReplicasForTest(c, slog.New(slog.NewTextHandler(logs, nil)))
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx, make(chan int)) }()
	await.Until(t, func() bool {
		return strings.Contains(logs.String(), "kubernetes API forbids reading peers") && strings.Contains(logs.String(), "statefulsets")
	}, "the forbidden StatefulSet list to be reported by the sources' Reporter; logs:\n%s", logs)
	checkReplicasMetrics(t, r)
	cancel()
	if err := await.Recv(t, errc, "Run to return after cancel"); err != nil {
		t.Fatal(err)
	}
}
