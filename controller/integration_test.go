package controller_test

// Integration tests: the real controller (the manager flock-controller runs)
// against the real local cluster (kube-apiserver, kube-controller-manager
// with the StatefulSet, PV binder and garbage collector, kube-scheduler, kwok
// nodes). Each test brings its own tainted kwok nodes, so concurrent tests of
// other packages neither land on them nor lose theirs.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/controller"
	"github.com/flockd/flock/localcluster/clustertest"
)

const (
	crdPath  = "../config/crd/bases/flockd.io_flocks.yaml"
	rolePath = "../config/rbac/role.yaml"
	poolKey  = "test.flockd.io/flock-pool"
	deadline = 90 * time.Second // bounds a hang; not a performance assertion
)

var crdOnce sync.Once

// env is one test's cluster, namespace, nodes and client.
type env struct {
	t     *testing.T
	c     *clustertest.Cluster
	cl    client.Client
	ns    string
	pool  string
	nodes []string
	cfg   *rest.Config // the controller's: least privilege

	mgr     ctrl.Manager // the manager started last
	mu      sync.Mutex
	started map[string]time.Time // Flock name -> start of its last reconcile that returned
	looks   int                  // lookAfter's changes of lookLabel
}

func newEnv(t *testing.T, nodes int) *env {
	c := clustertest.Get(t)
	e := &env{t: t, c: c}
	s, err := controller.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if e.cl, err = client.New(c.Config, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	crdOnce.Do(func() {
		ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	})
	e.installCRD()
	e.ns = c.Namespace(t)
	b := make([]byte, 3)
	rand.Read(b)
	e.pool = "p" + hex.EncodeToString(b)
	for i := range nodes {
		// Pod IPs from a range of the test's own (10.250.<random>.0/24 split
		// into /27s), so reverse lookups never alias the shared nodes' pods.
		cidr := fmt.Sprintf("10.250.%d.%d/27", b[0], 32*i)
		e.addNode(fmt.Sprintf("flock-%s-%d", e.pool, i), fmt.Sprintf("zone-%c", 'a'+i%2), cidr)
	}
	t.Cleanup(func() {
		// Volumes are cluster-scoped and deliberately outlive Flocks.
		err := e.cl.DeleteAllOf(context.Background(), &corev1.PersistentVolume{}, client.MatchingLabels{flockv1.NamespaceLabel: e.ns})
		if err != nil {
			t.Errorf("delete test volumes: %v", err)
		}
	})
	return e
}

// installCRD applies the checked-in CRD and waits until it is served.
func (e *env) installCRD() {
	raw, err := os.ReadFile(crdPath)
	if err != nil {
		e.t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		e.t.Fatalf("parse %s: %v", crdPath, err)
	}
	ctx := context.Background()
	if err := e.cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("flock-test"), client.ForceOwnership); err != nil {
		e.t.Fatalf("install CRD: %v", err)
	}
	e.c.WaitFor(e.t, "Flock CRD established and served", deadline, func(ctx context.Context) (bool, error) {
		var l flockv1.FlockList
		return e.cl.List(ctx, &l, client.InNamespace("default")) == nil, nil
	})
}

// addNode creates a kwok-managed node of the test's pool, tainted so that
// only the test's Flocks (which tolerate the taint) land there.
func (e *env) addNode(name, zone, podCIDR string) {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok",
				"topology.kubernetes.io/zone": zone, poolKey: e.pool,
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec: corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}, Taints: []corev1.Taint{{Key: poolKey, Value: e.pool, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
		},
	}
	if err := e.cl.Create(context.Background(), n); err != nil {
		e.t.Fatalf("create node %s: %v", name, err)
	}
	e.nodes = append(e.nodes, name)
	e.t.Cleanup(func() {
		if err := e.cl.Delete(context.Background(), n); client.IgnoreNotFound(err) != nil {
			e.t.Errorf("delete node %s: %v", name, err)
		}
	})
	e.c.WaitFor(e.t, "node "+name+" Ready", deadline, func(ctx context.Context) (bool, error) {
		var got corev1.Node
		if err := e.cl.Get(ctx, types.NamespacedName{Name: name}, &got); err != nil {
			return false, err
		}
		return slices.ContainsFunc(got.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}), nil
	})
}

// controllerConfig returns a rest.Config of a fresh ServiceAccount bound to
// the generated ClusterRole (config/rbac/role.yaml, under a unique name), so
// the tests prove the RBAC markers grant all the controller needs.
func (e *env) controllerConfig() *rest.Config {
	raw, err := os.ReadFile(rolePath)
	if err != nil {
		e.t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		e.t.Fatalf("parse %s: %v", rolePath, err)
	}
	ctx := context.Background()
	name := "flock-controller-test-" + e.pool
	role.ObjectMeta = metav1.ObjectMeta{Name: name}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "flock-controller", Namespace: e.ns}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: e.ns}},
	}
	for _, o := range []client.Object{&role, binding, sa} {
		if err := e.cl.Create(ctx, o); err != nil {
			e.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	e.t.Cleanup(func() {
		for _, o := range []client.Object{&role, binding} {
			if err := e.cl.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
				e.t.Errorf("delete %T %s: %v", o, o.GetName(), err)
			}
		}
	})
	tok, err := e.c.Client.CoreV1().ServiceAccounts(e.ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("token for %s: %v", sa.Name, err)
	}
	cfg := rest.AnonymousClientConfig(e.c.Config)
	cfg.BearerToken = tok.Status.Token
	cfg.Wrap(recordRequests)
	return cfg
}

// startManager runs the controller's manager in-process, as a
// ServiceAccount with exactly the generated RBAC, until the returned stop
// function (also run at cleanup) is called.
func (e *env) startManager() (stop func()) {
	_, stop = e.startManagerWith(nil)
	return stop
}

// startManagerWith is startManager with options changed by mod (if not nil);
// it also returns the running manager.
func (e *env) startManagerWith(mod func(*controller.ManagerOptions)) (ctrl.Manager, func()) {
	if e.cfg == nil {
		e.cfg = e.controllerConfig()
	}
	opts := controller.ManagerOptions{
		MetricsAddr: "0", ProbeAddr: "0", SkipNameValidation: true,
		Namespace: e.ns, // other test processes may run their own managers
		Logger:    logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Reconciled: func(f types.NamespacedName, started time.Time) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.started == nil {
				e.started = map[string]time.Time{}
			}
			e.started[f.Name] = started
		},
	}
	if mod != nil {
		mod(&opts)
	}
	mgr, err := controller.NewManager(e.cfg, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mgr = mgr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("manager: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return mgr, stop
}

// flock returns a Flock of the test's pool.
func (e *env) flock(name string, mode flockv1.Mode, replicas int32) *flockv1.Flock {
	return &flockv1.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: flockv1.FlockSpec{
			Replicas:     ptr.To(replicas),
			Mode:         mode,
			Ports:        []corev1.ServicePort{{Name: "peer", Port: 2380}},
			NodeSelector: map[string]string{poolKey: e.pool},
			Tolerations:  []corev1.Toleration{{Key: poolKey, Operator: corev1.TolerationOpEqual, Value: e.pool, Effect: corev1.TaintEffectNoSchedule}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{
					Name: "app", Image: "app:1",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}},
			}},
		},
	}
}

func (e *env) get(name string) *flockv1.Flock {
	var f flockv1.Flock
	if err := e.cl.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, &f); err != nil {
		e.t.Fatalf("get flock %s: %v", name, err)
	}
	return &f
}

func (e *env) scale(name string, replicas int32) {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	f := &flockv1.Flock{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
	if err := e.cl.Patch(context.Background(), f, client.RawPatch(types.MergePatchType, patch)); err != nil {
		e.t.Fatalf("scale flock %s to %d: %v", name, replicas, err)
	}
}

func (e *env) pod(name string) (*corev1.Pod, error) {
	var p corev1.Pod
	err := e.cl.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: name}, &p)
	return &p, err
}

func ready(p *corev1.Pod) bool { return p.DeletionTimestamp == nil && clustertest.PodReady(p) }

// members returns status.members as ordinal -> node.
func members(f *flockv1.Flock) map[int32]flockv1.MemberStatus {
	out := map[int32]flockv1.MemberStatus{}
	for _, m := range f.Status.Members {
		out[m.Ordinal] = m
	}
	return out
}

// waitPinnedReady waits until members 0..n-1 run Ready, each on the node its
// status names, each on a distinct node of the pool, with bound volumes on
// that node, and the Flock is Available for its current generation.
func (e *env) waitPinnedReady(name string, n int32) map[int32]string {
	var nodes map[int32]string
	e.c.WaitFor(e.t, fmt.Sprintf("flock %s: %d members ready on their pinned nodes", name, n), deadline, func(ctx context.Context) (bool, error) {
		f := e.get(name)
		if f.Status.ObservedGeneration != f.Generation || f.Status.ReadyReplicas != n || f.Status.Replicas != n ||
			!meta.IsStatusConditionTrue(f.Status.Conditions, flockv1.ConditionAvailable) {
			return false, fmt.Errorf("status %+v", f.Status)
		}
		ms := members(f)
		nodes = map[int32]string{}
		seen := map[string]bool{}
		for i := range n {
			m := ms[i]
			if m.Node == "" || seen[m.Node] || !slices.Contains(e.nodes, m.Node) || !m.Active || !m.Ready {
				return false, fmt.Errorf("member %d status %+v", i, m)
			}
			seen[m.Node] = true
			p, err := e.pod(fmt.Sprintf("%s-%d", name, i))
			if err != nil || !ready(p) || p.Spec.NodeName != m.Node {
				return false, fmt.Errorf("pod %d: %w on %q", i, err, p.Spec.NodeName)
			}
			var pvc corev1.PersistentVolumeClaim
			key := types.NamespacedName{Namespace: e.ns, Name: controller.ClaimName(f, "data", i)}
			if err := e.cl.Get(ctx, key, &pvc); err != nil {
				return false, err
			}
			if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != controller.VolumeName(f, "data", i, m.Node) {
				return false, fmt.Errorf("claim %s: %s to %q", key.Name, pvc.Status.Phase, pvc.Spec.VolumeName)
			}
			nodes[i] = m.Node
		}
		return true, nil
	})
	return nodes
}

func (e *env) setUnschedulable(node string, v bool) {
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, v)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := e.cl.Patch(context.Background(), n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		e.t.Fatalf("set node %s unschedulable=%t: %v", node, v, err)
	}
}

func (e *env) deletePod(name string) types.UID {
	p, err := e.pod(name)
	if err != nil {
		e.t.Fatalf("get pod %s: %v", name, err)
	}
	if err := e.cl.Delete(context.Background(), p); err != nil {
		e.t.Fatalf("delete pod %s: %v", name, err)
	}
	return p.UID
}

func (e *env) volumes(name string) []corev1.PersistentVolume {
	var pvs corev1.PersistentVolumeList
	if err := e.cl.List(context.Background(), &pvs, client.MatchingLabels{flockv1.FlockLabel: name, flockv1.NamespaceLabel: e.ns}); err != nil {
		e.t.Fatal(err)
	}
	return pvs.Items
}

func TestNodePinnedLifecycle(t *testing.T) {
	e := newEnv(t, 4)
	e.startManager()
	ctx := context.Background()
	f := e.flock("db", flockv1.ModeNodePinned, 3)
	if err := e.cl.Create(ctx, f); err != nil {
		t.Fatalf("create flock: %v", err)
	}
	nodes := e.waitPinnedReady("db", 3)
	t.Logf("placement %v", nodes)

	f = e.get("db")
	if f.Status.Mode != flockv1.ModeNodePinned || f.Status.Selector != flockv1.FlockLabel+"=db" {
		t.Errorf("status mode %q selector %q", f.Status.Mode, f.Status.Selector)
	}
	var svc corev1.Service
	if err := e.cl.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "db"}, &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("service: clusterIP %q publishNotReadyAddresses %v, want headless publishing not-ready", svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	var sts appsv1.StatefulSet
	if err := e.cl.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "db"}, &sts); err != nil {
		t.Fatal(err)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || sts.Spec.ServiceName != "db" {
		t.Errorf("statefulset policy %s service %s", sts.Spec.PodManagementPolicy, sts.Spec.ServiceName)
	}
	for _, pv := range e.volumes("db") {
		if pv.Status.Phase != corev1.VolumeBound || len(pv.OwnerReferences) != 0 || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
			t.Errorf("volume %s: phase %s owners %v reclaim %s", pv.Name, pv.Status.Phase, pv.OwnerReferences, pv.Spec.PersistentVolumeReclaimPolicy)
		}
	}

	t.Run("members have SRV, A and PTR records", func(t *testing.T) {
		e.checkDNS("db", "peer", 3)
	})

	t.Run("deleted member comes back on its node", func(t *testing.T) {
		old := e.deletePod("db-1")
		e.c.WaitFor(t, "db-1 recreated", deadline, func(context.Context) (bool, error) {
			p, err := e.pod("db-1")
			return err == nil && p.UID != old && ready(p), nil
		})
		if got := e.waitPinnedReady("db", 3); got[1] != nodes[1] {
			t.Errorf("db-1 moved from %s to %s", nodes[1], got[1])
		}
	})

	t.Run("cordoned node: member waits, never moves", func(t *testing.T) {
		e.setUnschedulable(nodes[1], true)
		t.Cleanup(func() { e.setUnschedulable(nodes[1], false) }) // also when failing midway
		old := e.deletePod("db-1")
		e.c.WaitFor(t, "db-1 waiting with Degraded condition", deadline, func(context.Context) (bool, error) {
			f := e.get("db")
			c := meta.FindStatusCondition(f.Status.Conditions, flockv1.ConditionDegraded)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "MembersWaiting" &&
				members(f)[1].Waiting == controller.WaitNodeUnschedulable && members(f)[1].Node == nodes[1], nil
		})
		e.c.WaitFor(t, "MemberWaiting event", deadline, func(ctx context.Context) (bool, error) {
			evs, err := e.c.Client.EventsV1().Events(e.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			return slices.ContainsFunc(evs.Items, func(ev eventsv1.Event) bool {
				return ev.Reason == "MemberWaiting" && ev.Regarding.Name == "db"
			}), nil
		})
		e.c.WaitFor(t, "db-1 recreated and Pending", deadline, func(context.Context) (bool, error) {
			p, err := e.pod("db-1")
			return err == nil && p.UID != old && p.Status.Phase == corev1.PodPending, nil
		})
		// The scheduler has had its chance (it said it could not place the
		// new pod): the member must still be unplaced.
		e.c.WaitFor(t, "the scheduler's FailedScheduling for the new db-1", deadline, func(ctx context.Context) (bool, error) {
			evs, err := e.c.Client.EventsV1().Events(e.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			return slices.ContainsFunc(evs.Items, func(ev eventsv1.Event) bool {
				return ev.Reason == "FailedScheduling" && ev.Regarding.Name == "db-1" && ev.Regarding.UID != old
			}), nil
		})
		if p, err := e.pod("db-1"); err != nil || p.Spec.NodeName != "" {
			t.Fatalf("db-1 on %q (err %v) while its node %s is cordoned: it must wait", p.Spec.NodeName, err, nodes[1])
		}
		e.setUnschedulable(nodes[1], false)
		if got := e.waitPinnedReady("db", 3); got[1] != nodes[1] {
			t.Errorf("db-1 came back on %s, want %s", got[1], nodes[1])
		}
		f := e.get("db")
		if c := meta.FindStatusCondition(f.Status.Conditions, flockv1.ConditionDegraded); c.Status != metav1.ConditionFalse {
			t.Errorf("Degraded after uncordon = %+v", c)
		}
	})

	t.Run("scale 3 -> 4 -> 2 keeps the volumes of removed members", func(t *testing.T) {
		e.scale("db", 4)
		got := e.waitPinnedReady("db", 4)
		for i := range int32(3) {
			if got[i] != nodes[i] {
				t.Errorf("member %d moved from %s to %s on scale up", i, nodes[i], got[i])
			}
		}
		nodes = got
		e.scale("db", 2)
		e.waitPinnedReady("db", 2)
		e.c.WaitFor(t, "db-2 and db-3 gone", deadline, func(context.Context) (bool, error) {
			_, err2 := e.pod("db-2")
			_, err3 := e.pod("db-3")
			return apierrors.IsNotFound(err2) && apierrors.IsNotFound(err3), nil
		})
		f := e.get("db")
		ms := members(f)
		for i := int32(2); i < 4; i++ {
			if ms[i].Active || ms[i].Node != nodes[i] {
				t.Errorf("removed member %d status %+v, want inactive on %s", i, ms[i], nodes[i])
			}
			var pvc corev1.PersistentVolumeClaim
			if err := e.cl.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: controller.ClaimName(f, "data", i)}, &pvc); err != nil {
				t.Errorf("claim of removed member %d: %v", i, err)
			}
			var pv corev1.PersistentVolume
			if err := e.cl.Get(ctx, types.NamespacedName{Name: controller.VolumeName(f, "data", i, nodes[i])}, &pv); err != nil {
				t.Errorf("volume of removed member %d: %v", i, err)
			}
		}
	})

	t.Run("deleting the Flock keeps the data", func(t *testing.T) {
		before := len(e.volumes("db"))
		if err := e.cl.Delete(ctx, e.get("db")); err != nil {
			t.Fatal(err)
		}
		e.c.WaitFor(t, "statefulset and service garbage-collected", deadline, func(ctx context.Context) (bool, error) {
			errS := e.cl.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "db"}, &appsv1.StatefulSet{})
			errV := e.cl.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "db"}, &corev1.Service{})
			return apierrors.IsNotFound(errS) && apierrors.IsNotFound(errV), nil
		})
		if after := len(e.volumes("db")); after != before || before != 4 {
			t.Errorf("volumes: %d before delete, %d after; want 4 both", before, after)
		}
		var claims corev1.PersistentVolumeClaimList
		if err := e.cl.List(ctx, &claims, client.InNamespace(e.ns)); err != nil || len(claims.Items) != 4 {
			t.Errorf("claims after delete: %d (err %v), want 4", len(claims.Items), err)
		}
	})
}

// checkDNS checks, against the cluster's CoreDNS, that the governing
// service's SRV records name exactly the members <flock>-<i>.<flock>.<ns>.svc,
// each with an A record of its pod's IP and a PTR record back to its name.
func (e *env) checkDNS(name, port string, n int) {
	svc := fmt.Sprintf("%s.%s.svc.%s.", name, e.ns, e.c.Domain)
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("%s-%d.%s", name, i, svc)
	}
	query := func(qname string, qtype uint16) ([]dns.RR, error) {
		m := new(dns.Msg)
		m.SetQuestion(qname, qtype)
		r, _, err := (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(m, e.c.DNSAddr)
		if err != nil {
			return nil, err
		}
		if r.Rcode != dns.RcodeSuccess {
			return nil, fmt.Errorf("%s %s: %s", qname, dns.TypeToString[qtype], dns.RcodeToString[r.Rcode])
		}
		return r.Answer, nil
	}
	e.c.WaitFor(e.t, "SRV, A and PTR records of "+svc, deadline, func(context.Context) (bool, error) {
		rrs, err := query(fmt.Sprintf("_%s._tcp.%s", port, svc), dns.TypeSRV)
		if err != nil {
			return false, err
		}
		var got []string
		for _, rr := range rrs {
			if srv, ok := rr.(*dns.SRV); ok {
				got = append(got, srv.Target)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return false, fmt.Errorf("SRV targets %v, want %v", got, want)
		}
		for i, fqdn := range want {
			p, err := e.pod(fmt.Sprintf("%s-%d", name, i))
			if err != nil {
				return false, err
			}
			rrs, err := query(fqdn, dns.TypeA)
			if err != nil {
				return false, err
			}
			if len(rrs) != 1 || rrs[0].(*dns.A).A.String() != p.Status.PodIP {
				return false, fmt.Errorf("A %s = %v, want %s", fqdn, rrs, p.Status.PodIP)
			}
			rev, err := dns.ReverseAddr(p.Status.PodIP)
			if err != nil {
				return false, err
			}
			if rrs, err = query(rev, dns.TypePTR); err != nil {
				return false, err
			}
			if !slices.ContainsFunc(rrs, func(rr dns.RR) bool { ptr, ok := rr.(*dns.PTR); return ok && ptr.Ptr == fqdn }) {
				return false, fmt.Errorf("PTR %s = %v, want %s", rev, rrs, fqdn)
			}
		}
		return true, nil
	})
}

func TestRestartMidScale(t *testing.T) {
	e := newEnv(t, 4)
	stop := e.startManager()
	f := e.flock("r", flockv1.ModeNodePinned, 1)
	if err := e.cl.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	first := e.waitPinnedReady("r", 1)
	e.scale("r", 4)
	e.c.WaitFor(t, "scale-up under way (pod r-1 created)", deadline, func(context.Context) (bool, error) {
		_, err := e.pod("r-1")
		return err == nil, nil
	})
	stop() // stopped mid-scale: r-1 exists, r-2 and r-3 may not be Ready yet
	mid := e.get("r")
	t.Logf("stopped with status replicas=%d ready=%d members=%v", mid.Status.Replicas, mid.Status.ReadyReplicas, mid.Status.Members)

	e.startManager()
	got := e.waitPinnedReady("r", 4)
	if got[0] != first[0] {
		t.Errorf("member 0 moved from %s to %s across the restart", first[0], got[0])
	}
	if n := len(e.volumes("r")); n != 4 {
		t.Errorf("%d volumes after the restart, want 4 (one per member, none duplicated)", n)
	}
}

func TestNetworkStorage(t *testing.T) {
	e := newEnv(t, 2)
	e.startManager()
	f := e.flock("net", flockv1.ModeNetworkStorage, 2)
	f.Spec.Storage.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("fast-network"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("7Gi")}},
		},
	}}
	if err := e.cl.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	var sts appsv1.StatefulSet
	e.c.WaitFor(t, "statefulset with the claim templates", deadline, func(ctx context.Context) (bool, error) {
		return e.cl.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "net"}, &sts) == nil, nil
	})
	vct := sts.Spec.VolumeClaimTemplates
	if len(vct) != 1 || vct[0].Name != "data" || ptr.Deref(vct[0].Spec.StorageClassName, "") != "fast-network" ||
		!vct[0].Spec.Resources.Requests.Storage().Equal(resource.MustParse("7Gi")) {
		t.Errorf("claim templates = %+v, want the Flock's", vct)
	}
	// Members are spread softly: preferred anti-affinity per node, zone spread.
	ps := sts.Spec.Template.Spec
	if ps.Affinity == nil || ps.Affinity.PodAntiAffinity == nil || len(ps.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		len(ps.TopologySpreadConstraints) != 1 || ps.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.ScheduleAnyway {
		t.Errorf("statefulset affinity %+v, spread %+v: want the default soft spreading", ps.Affinity, ps.TopologySpreadConstraints)
	}
	e.c.WaitFor(t, "status mode NetworkStorage", deadline, func(context.Context) (bool, error) {
		f := e.get("net")
		return f.Status.Mode == flockv1.ModeNetworkStorage && f.Status.ObservedGeneration == f.Generation, nil
	})
	if n := len(e.volumes("net")); n != 0 {
		t.Errorf("%d local volumes in NetworkStorage mode, want 0", n)
	}
}

// TestAutoWithoutDefaultClassIsNodePinned: with claim templates, Auto
// looks for a default StorageClass: NetworkStorage when the cluster has one
// (the local cluster does when its real node runs), else NodePinned.
func TestAutoWithoutDefaultClassIsNodePinned(t *testing.T) {
	e := newEnv(t, 2)
	var classes storagev1.StorageClassList
	if err := e.cl.List(context.Background(), &classes); err != nil {
		t.Fatal(err)
	}
	hasDefault := false
	for _, c := range classes.Items {
		hasDefault = hasDefault || c.Annotations["storageclass.kubernetes.io/is-default-class"] == "true"
	}
	e.startManager()
	f := e.flock("auto", flockv1.ModeAuto, 2)
	f.Spec.Storage.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
	if hasDefault { // a claim the StatefulSet accepts
		f.Spec.Storage.VolumeClaimTemplates[0].Spec = corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		}
	}
	if err := e.cl.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if hasDefault {
		e.c.WaitFor(t, "status.mode NetworkStorage (the cluster has a default StorageClass)", deadline, func(context.Context) (bool, error) {
			return e.get("auto").Status.Mode == flockv1.ModeNetworkStorage, nil
		})
		return
	}
	e.waitPinnedReady("auto", 2)
	if m := e.get("auto").Status.Mode; m != flockv1.ModeNodePinned {
		t.Errorf("status.mode = %s, want NodePinned", m)
	}
}

func TestReassign(t *testing.T) {
	e := newEnv(t, 3)
	e.startManager()
	ctx := context.Background()
	if err := e.cl.Create(ctx, e.flock("mv", flockv1.ModeNodePinned, 2)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("mv", 2)
	free := ""
	for _, n := range e.nodes {
		if n != nodes[0] && n != nodes[1] {
			free = n
		}
	}
	f := e.get("mv")
	oldPV := controller.VolumeName(f, "data", 1, nodes[1])

	// An explicit "1=<node>" moves member 1 even though its node is fine,
	// and the annotation is consumed.
	e.annotate("mv", flockv1.ReassignAnnotation, "1="+free)
	e.c.WaitFor(t, "member 1 reassigned to "+free, deadline, func(context.Context) (bool, error) {
		return members(e.get("mv"))[1].Node == free, nil
	})
	got := e.waitPinnedReady("mv", 2)
	if got[1] != free || got[0] != nodes[0] {
		t.Fatalf("after reassign: placement %v, want member 1 on %s, member 0 on %s", got, free, nodes[0])
	}
	e.c.WaitFor(t, "move done: annotation consumed, movingFrom cleared", deadline, func(context.Context) (bool, error) {
		f := e.get("mv")
		_, left := f.Annotations[flockv1.ReassignAnnotation]
		return !left && members(f)[1].MovingFrom == "", fmt.Errorf("annotations %v, member 1 %+v", f.Annotations, members(f)[1])
	})
	var pv corev1.PersistentVolume
	if err := e.cl.Get(ctx, types.NamespacedName{Name: oldPV}, &pv); err != nil {
		t.Fatalf("old volume of member 1: %v (data must stay)", err)
	}
	if pv.Status.Phase != corev1.VolumeReleased {
		t.Errorf("old volume %s phase %s, want Released", oldPV, pv.Status.Phase)
	}
	e.waitEvent("MemberMoved", "empty data")

	// Moving back: the member gets the data it left on its old node (its
	// Released volume is bound again), and the Event says so.
	e.annotate("mv", flockv1.ReassignAnnotation, "1="+nodes[1])
	e.c.WaitFor(t, "member 1 back on "+nodes[1], deadline, func(context.Context) (bool, error) {
		return members(e.get("mv"))[1].Node == nodes[1], nil
	})
	if got := e.waitPinnedReady("mv", 2); got[1] != nodes[1] || e.claimVolume("mv", 1) != oldPV {
		t.Fatalf("after moving back: placement %v, claim on %s; want member 1 on %s with its old volume %s", got, e.claimVolume("mv", 1), nodes[1], oldPV)
	}
	e.waitEvent("MemberMoved", "the data it left there")
	e.waitEvent("VolumeRebound", oldPV)
}

// TestNodeLoss: a member whose node is deleted waits for it under the
// default policy (Wait), and moves to the free node with a fresh volume once
// the Flock's spec.nodeLoss says Reassign and it has waited longer than
// after; its old volume stays, and status and an Event say why it moved.
func TestNodeLoss(t *testing.T) {
	e := newEnv(t, 4)
	e.startManager()
	ctx := context.Background()
	if err := e.cl.Create(ctx, e.flock("nl", flockv1.ModeNodePinned, 3)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("nl", 3)
	free := ""
	for _, n := range e.nodes {
		if !slices.Contains(slices.Collect(maps.Values(nodes)), n) {
			free = n
		}
	}
	oldPV := controller.VolumeName(e.get("nl"), "data", 1, nodes[1])
	if err := e.cl.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodes[1]}}); err != nil {
		t.Fatal(err)
	}
	e.waitsFor("nl", 1, controller.WaitNodeGone)
	e.lookAfter("nl", nil, nil)
	m := members(e.get("nl"))[1]
	if m.Node != nodes[1] || m.MovingFrom != "" || m.WaitingSince == nil {
		t.Fatalf("policy Wait: member 1 %+v, want it waiting for %s since a recorded time", m, nodes[1])
	}

	patch := []byte(`{"spec":{"nodeLoss":{"policy":"Reassign","after":"2s"}}}`)
	if err := e.cl.Patch(ctx, &flockv1.Flock{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "nl"}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	note := e.waitEvent("MemberMoved", "its node was lost")
	if !strings.Contains(note, "from node "+nodes[1]+" to "+free) {
		t.Errorf("MemberMoved says %q, want member 1 from %s to %s", note, nodes[1], free)
	}
	if got := e.waitPinnedReady("nl", 3); got[1] != free || got[0] != nodes[0] || got[2] != nodes[2] {
		t.Fatalf("after the node loss: placement %v, want member 1 on %s, the others where they were (%v)", got, free, nodes)
	}
	var pv corev1.PersistentVolume
	if err := e.cl.Get(ctx, types.NamespacedName{Name: oldPV}, &pv); err != nil {
		t.Fatalf("old volume of member 1: %v (data must stay)", err)
	}
	if m := members(e.get("nl"))[1]; m.MovingFrom != "" || m.MoveReason != "" || m.Waiting != "" {
		t.Errorf("move done, yet member 1 is %+v", m)
	}
}

// annotate sets (or, for value "-", removes) an annotation of Flock name.
func (e *env) annotate(name, key, value string) {
	v := any(value)
	if value == "-" {
		v = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
	if err != nil {
		e.t.Fatal(err)
	}
	f := &flockv1.Flock{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
	if err := e.cl.Patch(context.Background(), f, client.RawPatch(types.MergePatchType, patch)); err != nil {
		e.t.Fatalf("annotate flock %s %s=%q: %v", name, key, value, err)
	}
}

// waitEvent waits for an Event of the reason (whose note contains substr)
// in the test's namespace and returns its note.
func (e *env) waitEvent(reason, substr string) string {
	var note string
	e.c.WaitFor(e.t, fmt.Sprintf("%s event (%q)", reason, substr), deadline, func(ctx context.Context) (bool, error) {
		evs, err := e.c.Client.EventsV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Reason == reason && strings.Contains(ev.Note, substr) {
				note = ev.Note
				return true, nil
			}
		}
		return false, nil
	})
	return note
}

// TestAPIValidation checks the CRD's schema and rules on the real API server.
func TestAPIValidation(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	f := e.flock("v", flockv1.ModeAuto, 1)
	f.Spec.Storage.Local = &flockv1.LocalStorage{}
	if err := e.cl.Create(ctx, f); err != nil {
		t.Fatalf("create valid flock: %v", err)
	}
	got := e.get("v")
	if l := got.Spec.Storage.Local; l == nil || l.Path != "/var/lib/flock" || l.Size == nil || l.Size.String() != "1Gi" || !slices.Equal(l.Volumes, []string{"data"}) || l.Source != flockv1.LocalVolumeHostPath {
		t.Errorf("storage.local defaults = %+v", l)
	}
	if got.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || got.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType || got.Spec.PodDisruptionBudget != nil {
		t.Errorf("defaults: podManagementPolicy %q, updateStrategy %+v, podDisruptionBudget %v; want Parallel, RollingUpdate, none", got.Spec.PodManagementPolicy, got.Spec.UpdateStrategy, got.Spec.PodDisruptionBudget)
	}
	if got.Spec.Mode != flockv1.ModeAuto || got.Spec.Template.Spec.Containers[0].Name != "app" {
		t.Errorf("stored spec %+v", got.Spec)
	}
	invalid := []struct {
		name string
		mod  func(*flockv1.Flock)
	}{
		{"negative replicas", func(f *flockv1.Flock) { f.Spec.Replicas = ptr.To[int32](-1) }},
		{"unknown mode", func(f *flockv1.Flock) { f.Spec.Mode = "Magic" }},
		{"relative host path", func(f *flockv1.Flock) { f.Spec.Storage.Local = &flockv1.LocalStorage{Path: "data"} }},
		{"bad volume name", func(f *flockv1.Flock) { f.Spec.Storage.Local = &flockv1.LocalStorage{Volumes: []string{"Data_1"}} }},
		{"name too long for member pods", func(f *flockv1.Flock) { f.Name = strings.Repeat("a", 53) }},
		{"name the Service would refuse", func(f *flockv1.Flock) { f.Name = "1db" }},
		{"name with a dot", func(f *flockv1.Flock) { f.Name = "d.b" }},
		{"replicas beyond the maximum", func(f *flockv1.Flock) { f.Spec.Replicas = ptr.To[int32](2147483647) }},
		{"host path /", func(f *flockv1.Flock) { f.Spec.Storage.Local = &flockv1.LocalStorage{Path: "/"} }},
		{"host path /etc", func(f *flockv1.Flock) { f.Spec.Storage.Local = &flockv1.LocalStorage{Path: "/etc"} }},
		{"host path under /proc", func(f *flockv1.Flock) { f.Spec.Storage.Local = &flockv1.LocalStorage{Path: "/proc/flock"} }},
		{"host path with ..", func(f *flockv1.Flock) { f.Spec.Storage.Local = &flockv1.LocalStorage{Path: "/../../etc"} }},
		{"host path with a space", func(f *flockv1.Flock) { f.Spec.Storage.Local = &flockv1.LocalStorage{Path: "/var/lib/my flock"} }},
		{"host path with a newline", func(f *flockv1.Flock) { f.Spec.Storage.Local = &flockv1.LocalStorage{Path: "/var/lib/flock\n/x"} }},
		{"host path with a trailing slash", func(f *flockv1.Flock) { f.Spec.Storage.Local = &flockv1.LocalStorage{Path: "/var/lib/flock/"} }},
		{"size 0", func(f *flockv1.Flock) {
			f.Spec.Storage.Local = &flockv1.LocalStorage{Size: ptr.To(resource.MustParse("0"))}
		}},
		{"negative size", func(f *flockv1.Flock) {
			f.Spec.Storage.Local = &flockv1.LocalStorage{Size: ptr.To(resource.MustParse("-1Gi"))}
		}},
		{"empty template", func(f *flockv1.Flock) { f.Spec.Template = corev1.PodTemplateSpec{} }},
		{"template without containers", func(f *flockv1.Flock) { f.Spec.Template.Spec.Containers = nil }},
		{"template.spec.nodeName", func(f *flockv1.Flock) { f.Spec.Template.Spec.NodeName = "n1" }},
		{"bad nodeSelector key", func(f *flockv1.Flock) { f.Spec.NodeSelector = map[string]string{"a b": "x"} }},
		{"unknown podManagementPolicy", func(f *flockv1.Flock) { f.Spec.PodManagementPolicy = "Random" }},
		{"unknown updateStrategy", func(f *flockv1.Flock) { f.Spec.UpdateStrategy.Type = "Recreate" }},
		{"rollingUpdate with OnDelete", func(f *flockv1.Flock) {
			f.Spec.UpdateStrategy = flockv1.UpdateStrategy{Type: "OnDelete", RollingUpdate: &flockv1.RollingUpdate{Partition: ptr.To[int32](1)}}
		}},
		{"negative partition", func(f *flockv1.Flock) {
			f.Spec.UpdateStrategy.RollingUpdate = &flockv1.RollingUpdate{Partition: ptr.To[int32](-1)}
		}},
		{"budget with minAvailable and maxUnavailable", func(f *flockv1.Flock) {
			f.Spec.PodDisruptionBudget = &flockv1.PodDisruptionBudget{MinAvailable: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
		}},
		{"unknown nodeLoss policy", func(f *flockv1.Flock) { f.Spec.NodeLoss = &flockv1.NodeLoss{Policy: "Evict"} }},
		{"negative nodeLoss.after", func(f *flockv1.Flock) {
			f.Spec.NodeLoss = &flockv1.NodeLoss{Policy: flockv1.NodeLossReassign, After: &metav1.Duration{Duration: -time.Minute}}
		}},
		{"negative nodeLoss.quorum", func(f *flockv1.Flock) {
			f.Spec.NodeLoss = &flockv1.NodeLoss{Policy: flockv1.NodeLossReassign, Quorum: ptr.To[int32](-1)}
		}},
	}
	for _, tt := range invalid {
		f := e.flock("bad", flockv1.ModeNodePinned, 1)
		tt.mod(f)
		if err := e.cl.Create(ctx, f); !apierrors.IsInvalid(err) {
			t.Errorf("%s: create error = %v, want Invalid", tt.name, err)
			if err == nil {
				_ = e.cl.Delete(ctx, f) // so the next case is checked on its own
			}
		}
	}
	immutable := map[string]string{
		"mode":          `{"spec":{"mode":"NetworkStorage"}}`,
		"serviceName":   `{"spec":{"serviceName":"other"}}`,
		"storage.local": `{"spec":{"storage":{"local":{"path":"/elsewhere"}}}}`,
	}
	for field, patch := range immutable {
		err := e.cl.Patch(ctx, got.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
		if !apierrors.IsInvalid(err) {
			t.Errorf("changing %s: error = %v, want Invalid (immutable)", field, err)
		}
	}
	// Immutable both ways: storage.local can be neither removed (then
	// re-added with another value) nor added to a Flock created without it.
	if err := e.cl.Patch(ctx, got.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"storage":{"local":null}}}`))); !apierrors.IsInvalid(err) {
		t.Errorf("removing storage.local: error = %v, want Invalid (immutable)", err)
	}
	bare := e.flock("bare", flockv1.ModeNodePinned, 1)
	if err := e.cl.Create(ctx, bare); err != nil {
		t.Fatalf("create flock without storage.local: %v", err)
	}
	if err := e.cl.Patch(ctx, bare, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"storage":{"local":{"path":"/elsewhere"}}}}`))); !apierrors.IsInvalid(err) {
		t.Errorf("adding storage.local: error = %v, want Invalid (immutable)", err)
	}
	// The scale subresource is what kubectl scale uses.
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	if err := e.cl.SubResource("scale").Update(ctx, got, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("update scale subresource: %v", err)
	}
	if r := *e.get("v").Spec.Replicas; r != 3 {
		t.Errorf("replicas after scale = %d, want 3", r)
	}
}
