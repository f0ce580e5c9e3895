package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/flockd/flock/internal/testing/await"
)

func TestReason(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for err, want := range map[error]string{
		forbidden():                                           "forbidden",
		apierrors.NewUnauthorized("bad token"):                "unauthorized",
		apierrors.NewResourceExpired("too old"):               "expired",
		apierrors.NewGone("gone"):                             "expired",
		apierrors.NewServiceUnavailable("down"):               "unavailable",
		apierrors.NewTimeoutError("slow", 1):                  "unavailable",
		apierrors.NewTooManyRequests("busy", 1):               "unavailable",
		fmt.Errorf("dial: %w", syscall.ECONNREFUSED):          "unavailable",
		&net.OpError{Op: "dial", Err: errors.New("no route")}: "unavailable",
		apierrors.NewNotFound(gr, "x"):                        "other",
		errors.New("boom"):                                    "other",
	} {
		if got := Reason(err); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
}

// scriptedLW fails or succeeds as told; its watches are fake watchers.
type scriptedLW struct {
	listErr, watchErr error
	watches           chan *watch.FakeWatcher
}

func (s *scriptedLW) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	if s.listErr != nil {
		return nil, s.listErr
	}
	return &metav1.List{}, nil
}

func (s *scriptedLW) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	if s.watchErr != nil {
		return nil, s.watchErr
	}
	w := watch.NewFakeWithChanSize(1, false)
	s.watches <- w
	return w, nil
}

var _ cache.ListerWatcherWithContext = (*scriptedLW)(nil)

func TestReporterMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	res := target.Resource
	slw := &scriptedLW{watches: make(chan *watch.FakeWatcher, 4)}
	lw := NewReporter(target, nil).WithMetrics(m).ListerWatcher(slw, fake.NewClientset())
	ctx := context.Background()

	slw.listErr = forbidden()
	for range 3 {
		if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err == nil {
			t.Fatal("list succeeded")
		}
	}
	if got := testutil.ToFloat64(m.Failures.WithLabelValues(res, "list", "forbidden")); got != 3 {
		t.Errorf("forbidden list failures = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.Failing.WithLabelValues(res)); got != 1 {
		t.Errorf("failing = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.Relists.WithLabelValues(res)); got != 0 {
		t.Errorf("relists before any success = %v, want 0", got)
	}

	slw.listErr = nil
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.Failing.WithLabelValues(res)); got != 0 {
		t.Errorf("failing after success = %v, want 0", got)
	}

	// A 410 inside the watch stream is counted; the following list is a relist.
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fw := await.Recv(t, slw.watches, "the watch to be opened")
	status := apierrors.NewResourceExpired("too old resource version").Status()
	fw.Error(&status)
	select {
	case e := <-w.ResultChan():
		if e.Type != watch.Error {
			t.Errorf("event %v, want Error passed through", e.Type)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	w.Stop()
	if got := testutil.ToFloat64(m.Failures.WithLabelValues(res, "watch", "expired")); got != 1 {
		t.Errorf("expired watch failures = %v, want 1", got)
	}
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	// A streaming list (watch with initial events) is a relist too.
	yes := true
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: &yes}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.Relists.WithLabelValues(res)); got != 2 {
		t.Errorf("relists = %v, want 2", got)
	}
	slw.watchErr = apierrors.NewServiceUnavailable("apiserver restarting")
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("watch succeeded")
	}
	if got := testutil.ToFloat64(m.Failures.WithLabelValues(res, "watch", "unavailable")); got != 1 {
		t.Errorf("unavailable watch failures = %v, want 1", got)
	}
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 3 {
		t.Errorf("gather: %d families, %v", len(mfs), err)
	}
}

func TestNilMetrics(t *testing.T) {
	r := NewReporter(target, nil).WithMetrics(nil)
	r.Failed(context.Background(), "list", forbidden())
	r.Succeeded()
	var m *Metrics
	m.relisted("x")
}
