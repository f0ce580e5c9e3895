package controller_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/controller"
)

// TestStoragePathNotAllowed: with an administrator's allowlist, a
// NodePinned Flock whose storage.local.path is outside it is refused
// (Degraded StoragePathNotAllowed, an Event) and gets no volume and no
// StatefulSet; a Flock below an allowed directory runs.
func TestStoragePathNotAllowed(t *testing.T) {
	e := newEnv(t, 1)
	e.startManagerWith(func(o *controller.ManagerOptions) { o.AllowedStoragePaths = []string{"/srv/flock-allowed"} })
	ctx := context.Background()
	bad := e.flock("outside", flockv1.ModeNodePinned, 1)
	bad.Spec.Storage.Local = &flockv1.LocalStorage{Path: "/home/someone"}
	if err := e.cl.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	e.c.WaitFor(t, "flock outside Degraded: StoragePathNotAllowed", deadline, func(context.Context) (bool, error) {
		c := meta.FindStatusCondition(e.get("outside").Status.Conditions, flockv1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == controller.RefusedStoragePathDenied, fmt.Errorf("degraded %+v", c)
	})
	e.waitEvent(controller.RefusedStoragePathDenied, "/home/someone")
	if vs := e.volumes("outside"); len(vs) != 0 {
		t.Errorf("%d volumes made for a refused path", len(vs))
	}
	if err := e.cl.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "outside"}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("statefulset outside: %v, want none", err)
	}

	good := e.flock("inside", flockv1.ModeNodePinned, 1)
	good.Spec.Storage.Local = &flockv1.LocalStorage{Path: "/srv/flock-allowed/" + e.ns}
	if err := e.cl.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	e.waitPinnedReady("inside", 1)
}
