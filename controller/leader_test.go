package controller_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/controller"
)

const (
	leaderRolePath    = "../config/rbac/leader_election_role.yaml"
	leaderBindingPath = "../config/rbac/leader_election_role_binding.yaml"
	leaseName         = "flock-controller.flockd.io" // the manager's election ID
)

// grantLeaderElection creates, in the test's namespace, the checked-in
// leader election Role and RoleBinding (config/rbac), bound to the
// controller's ServiceAccount, so the test proves they suffice.
func (e *env) grantLeaderElection() {
	if e.cfg == nil {
		e.cfg = e.controllerConfig()
	}
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	for path, obj := range map[string]any{leaderRolePath: &role, leaderBindingPath: &binding} {
		raw, err := os.ReadFile(path)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(raw, obj); err != nil {
			e.t.Fatalf("parse %s: %v", path, err)
		}
	}
	role.Namespace = e.ns
	binding.Namespace = e.ns
	for i := range binding.Subjects {
		binding.Subjects[i].Namespace = e.ns
	}
	for _, o := range []client.Object{&role, &binding} {
		if err := e.cl.Create(context.Background(), o); err != nil {
			e.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func (e *env) lease() (*coordinationv1.Lease, error) {
	var l coordinationv1.Lease
	err := e.cl.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: leaseName}, &l)
	return &l, err
}

func elected(m ctrl.Manager) bool {
	select {
	case <-m.Elected():
		return true
	default:
		return false
	}
}

// TestLeaderElection runs two managers with leader election on, as
// flock-controller does by default: only the holder of the Lease reconciles,
// and when the leader stops the other one takes over.
func TestLeaderElection(t *testing.T) {
	e := newEnv(t, 2)
	e.grantLeaderElection()
	ctx := context.Background()

	// First a foreign holder with a long lease: neither manager may reconcile.
	foreign := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: e.ns},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("someone-else"),
			LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime:          &metav1.MicroTime{Time: time.Now()},
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
	if err := e.cl.Create(ctx, foreign); err != nil {
		t.Fatalf("create lease: %v", err)
	}
	elect := func(o *controller.ManagerOptions) {
		o.LeaderElection = true
		o.LeaderElectionNamespace = e.ns
		o.LeaseDuration = 4 * time.Second
		o.RenewDeadline = 3 * time.Second
		o.RetryPeriod = 500 * time.Millisecond
	}
	mgrs := make([]ctrl.Manager, 2)
	stops := make([]func(), 2)
	for i := range mgrs {
		mgrs[i], stops[i] = e.startManagerWith(elect)
	}
	f := e.flock("le", flockv1.ModeNetworkStorage, 2)
	f.Spec.Storage.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}}
	if err := e.cl.Create(ctx, f); err != nil {
		t.Fatal(err)
	}
	// Give both candidates several retry periods; a vacuous pass on a slow
	// machine is possible, a false failure is not.
	time.Sleep(3 * time.Second)
	stsKey := types.NamespacedName{Namespace: e.ns, Name: "le"}
	if err := e.cl.Get(ctx, stsKey, &appsv1.StatefulSet{}); err == nil {
		t.Fatal("a StatefulSet was created while neither manager held the Lease")
	}
	for i, m := range mgrs {
		if elected(m) {
			t.Fatalf("manager %d elected while someone-else holds the Lease", i)
		}
	}

	// Release the Lease as client-go does on a clean stop: one manager wins.
	l, err := e.lease()
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To("")
	l.Spec.LeaseDurationSeconds = ptr.To[int32](1)
	if err := e.cl.Update(ctx, l); err != nil {
		t.Fatalf("release lease: %v", err)
	}
	leader := -1
	e.c.WaitFor(t, "one manager elected", deadline, func(context.Context) (bool, error) {
		for i, m := range mgrs {
			if elected(m) {
				leader = i
				return true, nil
			}
		}
		return false, nil
	})
	follower := 1 - leader
	var holder string
	e.c.WaitFor(t, "statefulset reconciled by the leader", deadline, func(ctx context.Context) (bool, error) {
		var sts appsv1.StatefulSet
		if err := e.cl.Get(ctx, stsKey, &sts); err != nil {
			return false, err
		}
		got := e.get("le")
		if ptr.Deref(sts.Spec.Replicas, 0) != 2 || got.Status.ObservedGeneration != got.Generation {
			return false, fmt.Errorf("statefulset replicas %d, flock observed generation %d of %d", ptr.Deref(sts.Spec.Replicas, 0), got.Status.ObservedGeneration, got.Generation)
		}
		return true, nil
	})
	l, err = e.lease()
	if err != nil {
		t.Fatal(err)
	}
	holder = ptr.Deref(l.Spec.HolderIdentity, "")
	if holder == "" || holder == "someone-else" {
		t.Fatalf("lease holder %q, want the elected manager", holder)
	}
	if elected(mgrs[follower]) {
		t.Fatalf("both managers elected (lease holder %s)", holder)
	}
	t.Logf("manager %d leads as %s", leader, holder)
	// The leader elector's Event goes through the core API group: the
	// checked-in Role must allow it.
	e.c.WaitFor(t, "LeaderElection event of "+holder, deadline, func(ctx context.Context) (bool, error) {
		evs, err := e.c.Client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(evs.Items, func(ev corev1.Event) bool {
			return ev.Reason == "LeaderElection" && ev.InvolvedObject.Name == leaseName && strings.HasPrefix(ev.Message, holder+" ")
		}), nil
	})

	// Stop the leader: the follower takes over and reconciles a scale.
	stops[leader]()
	e.c.WaitFor(t, "follower elected", deadline, func(context.Context) (bool, error) {
		return elected(mgrs[follower]), nil
	})
	e.c.WaitFor(t, "lease held by the follower", deadline, func(context.Context) (bool, error) {
		l, err := e.lease()
		if err != nil {
			return false, err
		}
		h := ptr.Deref(l.Spec.HolderIdentity, "")
		return h != "" && h != holder, fmt.Errorf("holder %q", h)
	})
	e.scale("le", 3)
	e.c.WaitFor(t, "scale reconciled by the new leader", deadline, func(ctx context.Context) (bool, error) {
		var sts appsv1.StatefulSet
		if err := e.cl.Get(ctx, stsKey, &sts); err != nil {
			return false, err
		}
		got := e.get("le")
		if ptr.Deref(sts.Spec.Replicas, 0) != 3 || got.Status.ObservedGeneration != got.Generation {
			return false, fmt.Errorf("statefulset replicas %d, flock observed generation %d of %d", ptr.Deref(sts.Spec.Replicas, 0), got.Status.ObservedGeneration, got.Generation)
		}
		return true, nil
	})
}

type nopRecorder struct{}

func (nopRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

// TestLeadershipCheckedBeforeDestructiveSteps: a reconciler that does not
// hold the Lease (another replica took over while it was paused) stops
// before deleting a moving member's claim or pod; holding it, it proceeds.
func TestLeadershipCheckedBeforeDestructiveSteps(t *testing.T) {
	e := newEnv(t, 3)
	stop := e.startManager()
	ctx := context.Background()
	if err := e.cl.Create(ctx, e.flock("ld", flockv1.ModeNodePinned, 2)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("ld", 2)
	stop()
	free := ""
	for _, n := range e.nodes {
		if n != nodes[0] && n != nodes[1] {
			free = n
		}
	}
	// A move of member 1 recorded in status, as the leader records it.
	f := e.get("ld")
	for i := range f.Status.Members {
		if f.Status.Members[i].Ordinal == 1 {
			f.Status.Members[i].Node, f.Status.Members[i].MovingFrom = free, nodes[1]
		}
	}
	if err := e.cl.Status().Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: e.ns},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](3600),
			RenewTime: &metav1.MicroTime{Time: time.Now()},
		},
	}
	if err := e.cl.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	r := &controller.Reconciler{Client: e.cl, APIReader: e.cl, Recorder: nopRecorder{},
		Leader: controller.LeaderCheck(e.c.Client.CoordinationV1(), e.ns, leaseName, "me", time.Now)}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: e.ns, Name: "ld"}}
	claimKey := types.NamespacedName{Namespace: e.ns, Name: controller.ClaimName(f, "data", 1)}
	// Intact means the same claim and pod (by UID) with no deletion under
	// way: the StatefulSet controller re-creates a deleted pod and claim
	// under the same names within milliseconds.
	var claim0 corev1.PersistentVolumeClaim
	if err := e.cl.Get(ctx, claimKey, &claim0); err != nil {
		t.Fatal(err)
	}
	pod0, err := e.pod("ld-1")
	if err != nil {
		t.Fatal(err)
	}
	intact := func() bool {
		var pvc corev1.PersistentVolumeClaim
		err := e.cl.Get(ctx, claimKey, &pvc)
		p, perr := e.pod("ld-1")
		return err == nil && pvc.UID == claim0.UID && pvc.DeletionTimestamp == nil &&
			perr == nil && p.UID == pod0.UID && p.DeletionTimestamp == nil
	}
	_, err = r.Reconcile(ctx, req)
	if !intact() {
		t.Fatalf("claim or pod of member 1 deleted by a reconciler that does not hold the Lease (reconcile error: %v)", err)
	}
	if err == nil || !strings.Contains(err.Error(), "not the leader") {
		t.Errorf("reconcile error = %v, want not the leader", err)
	}

	if err := e.cl.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity, lease.Spec.RenewTime = ptr.To("me"), &metav1.MicroTime{Time: time.Now()}
	if err := e.cl.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("reconcile as the leader: %v", err)
	}
	if intact() {
		t.Errorf("leading reconciler did not carry out the recorded move (claim and pod of member 1 intact)")
	}
}

// TestLeaderElectionCreatesLease: with no Lease yet, the first manager
// creates it (the Role's create verb) and leads.
func TestLeaderElectionCreatesLease(t *testing.T) {
	e := newEnv(t, 0)
	e.grantLeaderElection()
	mgr, _ := e.startManagerWith(func(o *controller.ManagerOptions) {
		o.LeaderElection = true
		o.LeaderElectionNamespace = e.ns
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	})
	e.c.WaitFor(t, "manager elected", deadline, func(context.Context) (bool, error) {
		return elected(mgr), nil
	})
	l, err := e.lease()
	if err != nil || ptr.Deref(l.Spec.HolderIdentity, "") == "" {
		t.Fatalf("lease after election: %+v, %v", l, err)
	}
}
