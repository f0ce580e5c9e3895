package controller_test

// Integration tests of the controller's safety rules (issue 15): no member
// lands on empty data without a current, explicit request; status never
// lies.

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flockv1 "github.com/flockd/flock/api/v1alpha1"
	"github.com/flockd/flock/controller"
	"github.com/flockd/flock/internal/testing/await"
)

// lookLabel is the node label lookAfter changes to make the controller
// reconcile the test's Flocks (a node's labels can change placement); no
// Flock selects it.
const lookLabel = "test.flockd.io/look"

// lookAfter returns once the controller has looked at a change, so that
// what it did not do (delete, move, create) is evidence, not a moment's
// luck. It waits until obj (if not nil; its name set) is in the manager's
// cache as seen accepts it, then changes lookLabel on one of the test's
// nodes and waits until a reconcile of Flock name that started after that
// has returned: that reconcile read the change. (The Flock itself is not
// touched: the controller's status write would conflict and put the work
// off to a later reconcile.)
func (e *env) lookAfter(name string, obj client.Object, seen func(client.Object) bool) {
	e.t.Helper()
	if obj != nil {
		await.Until(e.t, func() bool {
			return e.mgr.GetCache().Get(context.Background(), client.ObjectKeyFromObject(obj), obj) == nil && seen(obj)
		}, "%T %s changed in the controller's cache", obj, obj.GetName())
	}
	since := time.Now()
	e.looks++
	touched := false
	for _, n := range e.nodes { // one still there (tests delete nodes)
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"%d"}}}`, lookLabel, e.looks)
		err := e.cl.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, client.RawPatch(types.MergePatchType, patch))
		if err == nil {
			touched = true
			break
		}
		if !apierrors.IsNotFound(err) {
			e.t.Fatalf("label node %s: %v", n, err)
		}
	}
	if !touched {
		e.t.Fatalf("no node of the test left to label")
	}
	await.Until(e.t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.started[name].After(since)
	}, "a reconcile of flock %s that started after its cache held the change", name)
}

// refusedAndConsumed waits until the controller has refused Flock name's
// reassign annotation: a ReassignRefused Event whose note holds note, and
// the annotation removed. A request kept for later fails it.
func (e *env) refusedAndConsumed(name, note string) {
	e.t.Helper()
	e.waitEvent("ReassignRefused", note)
	e.c.WaitFor(e.t, "the reassign annotation of "+name+" consumed", deadline, func(context.Context) (bool, error) {
		v, left := e.get(name).Annotations[flockv1.ReassignAnnotation]
		return !left, fmt.Errorf("annotation %q left", v)
	})
}

// claimVolume returns the volume member ord's claim is bound to.
func (e *env) claimVolume(name string, ord int32) string {
	var pvc corev1.PersistentVolumeClaim
	key := types.NamespacedName{Namespace: e.ns, Name: controller.ClaimName(e.get(name), "data", ord)}
	if err := e.cl.Get(context.Background(), key, &pvc); err != nil {
		e.t.Fatalf("get claim %s: %v", key.Name, err)
	}
	return pvc.Spec.VolumeName
}

// TestReassignIsNotAStandingOrder: a bare "1" set while member 1's node is
// fine, and an entry for an inactive member, are refused and consumed; a
// later cordon or scale-up moves nothing.
func TestReassignIsNotAStandingOrder(t *testing.T) {
	e := newEnv(t, 3)
	e.startManager()
	if err := e.cl.Create(context.Background(), e.flock("so", flockv1.ModeNodePinned, 2)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("so", 2)
	vol1 := e.claimVolume("so", 1)

	e.annotate("so", flockv1.ReassignAnnotation, "1")
	e.refusedAndConsumed("so", "reassign 1 refused")
	e.setUnschedulable(nodes[1], true)
	t.Cleanup(func() { e.setUnschedulable(nodes[1], false) })
	e.c.WaitFor(t, "member 1 running on its cordoned node, not moved", deadline, func(context.Context) (bool, error) {
		f := e.get("so")
		if m := members(f)[1]; m.Node != nodes[1] {
			t.Fatalf("member 1 moved from %s to %s by a leftover bare reassign and a later cordon", nodes[1], m.Node)
		}
		_, left := f.Annotations[flockv1.ReassignAnnotation]
		return !left && f.Status.ReadyReplicas == 2, fmt.Errorf("annotations %v ready %d", f.Annotations, f.Status.ReadyReplicas)
	})
	e.lookAfter("so", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodes[1]}}, func(o client.Object) bool {
		return o.(*corev1.Node).Spec.Unschedulable
	})
	if got := e.claimVolume("so", 1); got != vol1 {
		t.Fatalf("member 1's claim now bound to %s, was %s: its claim was released", got, vol1)
	}
	if m := members(e.get("so"))[1]; m.Node != nodes[1] || m.MovingFrom != "" {
		t.Fatalf("member 1 %+v after the cordon, want still on %s", m, nodes[1])
	}
	e.setUnschedulable(nodes[1], false)

	// An entry for an inactive member is refused, not kept for a scale-up.
	e.scale("so", 1)
	e.waitPinnedReady("so", 1)
	free := ""
	for _, n := range e.nodes {
		if n != nodes[0] && n != nodes[1] {
			free = n
		}
	}
	e.annotate("so", flockv1.ReassignAnnotation, "1="+free)
	e.refusedAndConsumed("so", "member 1 is not active")
	e.scale("so", 2)
	got := e.waitPinnedReady("so", 2)
	if got[1] != nodes[1] {
		t.Fatalf("member 1 came back on %s, want its own node %s (an entry set while it was inactive applied at scale-up)", got[1], nodes[1])
	}
	if got := e.claimVolume("so", 1); got != vol1 {
		t.Errorf("member 1's claim bound to %s, want its old volume %s", got, vol1)
	}
	if f := e.get("so"); f.Annotations[flockv1.ReassignAnnotation] != "" {
		t.Errorf("annotation left: %v", f.Annotations)
	}
}

// TestErrorKeepsStatus: a malformed annotation and a failing apply never
// empty the status (members, counts, observedGeneration stay) and never
// change placement.
func TestErrorKeepsStatus(t *testing.T) {
	e := newEnv(t, 4)
	e.startManager()
	ctx := context.Background()
	if err := e.cl.Create(ctx, e.flock("es", flockv1.ModeNodePinned, 3)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("es", 3)
	good := e.get("es")

	// keeps fails the test as soon as the status loses what it had.
	keeps := func(f *flockv1.Flock) {
		t.Helper()
		ms := members(f)
		for i := range int32(3) {
			if ms[i].Node != nodes[i] || !ms[i].Active {
				t.Fatalf("member %d status %+v, want active on %s (status %+v)", i, ms[i], nodes[i], f.Status)
			}
		}
		if f.Status.ReadyReplicas != 3 || f.Status.Replicas != 3 {
			t.Fatalf("status replicas %d ready %d with all 3 members running: the status lies", f.Status.Replicas, f.Status.ReadyReplicas)
		}
	}

	e.annotate("es", flockv1.ReassignAnnotation, "four")
	// The reconcile that refuses the annotation writes the status before
	// it consumes it: the last look below sees that status.
	e.c.WaitFor(t, "malformed annotation refused and consumed", deadline, func(context.Context) (bool, error) {
		f := e.get("es")
		keeps(f)
		_, left := f.Annotations[flockv1.ReassignAnnotation]
		return !left, nil
	})
	e.waitEvent("ReassignRefused", "four")

	// A template the StatefulSet API refuses: every apply fails.
	f := e.get("es")
	f.Spec.Template.Spec.Containers[0].Name = "App_1"
	if err := e.cl.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	bad := e.get("es").Generation
	e.c.WaitFor(t, "Degraded ReconcileError, last good status kept", deadline, func(context.Context) (bool, error) {
		f := e.get("es")
		keeps(f)
		if f.Status.ObservedGeneration != good.Status.ObservedGeneration {
			t.Fatalf("observedGeneration %d after a failed reconcile of generation %d, want %d", f.Status.ObservedGeneration, bad, good.Status.ObservedGeneration)
		}
		c := meta.FindStatusCondition(f.Status.Conditions, flockv1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "ReconcileError", fmt.Errorf("Degraded %+v", c)
	})
	e.lookAfter("es", &flockv1.Flock{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "es"}}, func(o client.Object) bool { return o.GetGeneration() == bad })
	keeps(e.get("es"))

	f = e.get("es")
	f.Spec.Template.Spec.Containers[0].Name = "app"
	if err := e.cl.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	if got := e.waitPinnedReady("es", 3); !maps.Equal(got, nodes) {
		t.Fatalf("placement %v after the error, want %v", got, nodes)
	}
	if c := meta.FindStatusCondition(e.get("es").Status.Conditions, flockv1.ConditionDegraded); c.Status != metav1.ConditionFalse {
		t.Errorf("Degraded after the fix = %+v", c)
	}
}

// TestOnlyOwnObjects: a Service or a claim the Flock does not own is left
// alone: the Flock is refused (Degraded, an Event), and deleting the Flock
// does not delete the Service.
func TestOnlyOwnObjects(t *testing.T) {
	e := newEnv(t, 2)
	e.startManager()
	ctx := context.Background()
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: e.ns},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, // headless, like the Flock's: apply could take it over
			Selector: map[string]string{"app": "other"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if err := e.cl.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-fc-0", Namespace: e.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: new(""),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := e.cl.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	fs := e.flock("fs", flockv1.ModeNodePinned, 1)
	fs.Spec.ServiceName = "shared"
	fc := e.flock("fc", flockv1.ModeNodePinned, 1)
	for _, f := range []*flockv1.Flock{fs, fc} {
		if err := e.cl.Create(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(name, reason string) {
		t.Helper()
		e.c.WaitFor(t, name+" refused: "+reason, deadline, func(ctx context.Context) (bool, error) {
			var svc corev1.Service
			if err := e.cl.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "shared"}, &svc); err != nil {
				return false, err
			}
			if len(svc.OwnerReferences) != 0 || svc.Spec.PublishNotReadyAddresses || svc.Spec.Selector["app"] != "other" {
				t.Fatalf("foreign Service taken over: owners %v selector %v publishNotReady %v", svc.OwnerReferences, svc.Spec.Selector, svc.Spec.PublishNotReadyAddresses)
			}
			var pvc corev1.PersistentVolumeClaim
			if err := e.cl.Get(ctx, client.ObjectKeyFromObject(claim), &pvc); err != nil {
				return false, err
			}
			if pvc.Spec.VolumeName != "" && name == "fc" {
				t.Fatalf("foreign claim %s bound to the Flock's volume %s", pvc.Name, pvc.Spec.VolumeName)
			}
			c := meta.FindStatusCondition(e.get(name).Status.Conditions, flockv1.ConditionDegraded)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason, fmt.Errorf("Degraded %+v", c)
		})
		e.waitEvent(reason, "")
	}
	refused("fs", controller.RefusedServiceNotOwned)
	refused("fc", controller.RefusedClaimNotOwned)
	e.lookAfter("fs", nil, nil)
	e.lookAfter("fc", nil, nil)
	refused("fs", controller.RefusedServiceNotOwned) // still, when looked at again
	refused("fc", controller.RefusedClaimNotOwned)

	// Deleting the Flock leaves the foreign Service. In the foreground: the
	// Flock is gone only once the garbage collector has deleted what it
	// owns (its owner references block the owner's deletion).
	if err := e.cl.Delete(ctx, e.get("fs"), client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	e.c.WaitFor(t, "flock fs gone", deadline, func(ctx context.Context) (bool, error) {
		err := e.cl.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "fs"}, &flockv1.Flock{})
		return apierrors.IsNotFound(err), err
	})
	var svc corev1.Service
	if err := e.cl.Get(ctx, client.ObjectKeyFromObject(foreign), &svc); err != nil {
		t.Fatalf("foreign Service after deleting the Flock: %v", err)
	}
	if svc.Spec.Selector["app"] != "other" || len(svc.OwnerReferences) != 0 {
		t.Errorf("foreign Service changed: selector %v owners %v", svc.Spec.Selector, svc.OwnerReferences)
	}
}

// TestWaitingMemberDoesNotStopOthers: member 0 waits for its cordoned
// node; member 2, deleted at the same time, comes back on its own healthy
// node, and status says who waits for what.
func TestWaitingMemberDoesNotStopOthers(t *testing.T) {
	e := newEnv(t, 3)
	e.startManager()
	if err := e.cl.Create(context.Background(), e.flock("wm", flockv1.ModeNodePinned, 3)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("wm", 3)
	e.setUnschedulable(nodes[0], true)
	t.Cleanup(func() { e.setUnschedulable(nodes[0], false) })
	e.deletePod("wm-0")
	old2 := e.deletePod("wm-2")
	e.c.WaitFor(t, "wm-2 back and Ready on its node while wm-0 waits", deadline, func(context.Context) (bool, error) {
		p, err := e.pod("wm-2")
		if err != nil {
			return false, err
		}
		return p.UID != old2 && ready(p) && p.Spec.NodeName == nodes[2], fmt.Errorf("wm-2 uid %s ready %v on %q", p.UID, ready(p), p.Spec.NodeName)
	})
	e.c.WaitFor(t, "status: member 0 waits for its cordoned node", deadline, func(context.Context) (bool, error) {
		f := e.get("wm")
		c := meta.FindStatusCondition(f.Status.Conditions, flockv1.ConditionDegraded)
		m := members(f)
		return m[0].Waiting == controller.WaitNodeUnschedulable && m[2].Waiting == "" && m[2].Ready && f.Status.ReadyReplicas == 2 &&
			c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "wm-0") && !strings.Contains(c.Message, "wm-2"), fmt.Errorf("status %+v", f.Status)
	})
	e.setUnschedulable(nodes[0], false)
	if got := e.waitPinnedReady("wm", 3); !maps.Equal(got, nodes) {
		t.Errorf("placement %v after uncordon, want %v", got, nodes)
	}
}

// TestOrderedReadyStatefulSetReplaced: a StatefulSet made by an earlier
// version (OrderedReady, immutable) is re-created with Parallel, and its
// pods keep running (same UIDs).
func TestOrderedReadyStatefulSetReplaced(t *testing.T) {
	e := newEnv(t, 2)
	stop := e.startManager()
	ctx := context.Background()
	if err := e.cl.Create(ctx, e.flock("om", flockv1.ModeNodePinned, 2)); err != nil {
		t.Fatal(err)
	}
	e.waitPinnedReady("om", 2)
	stop()
	var sts appsv1.StatefulSet
	key := types.NamespacedName{Namespace: e.ns, Name: "om"}
	if err := e.cl.Get(ctx, key, &sts); err != nil {
		t.Fatal(err)
	}
	if err := e.cl.Delete(ctx, &sts, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	e.c.WaitFor(t, "statefulset om deleted (pods orphaned)", deadline, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(e.cl.Get(ctx, key, &appsv1.StatefulSet{})), nil
	})
	old := sts.DeepCopy()
	old.ObjectMeta = metav1.ObjectMeta{Name: sts.Name, Namespace: sts.Namespace, Labels: sts.Labels, OwnerReferences: sts.OwnerReferences}
	old.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	old.Status = appsv1.StatefulSetStatus{}
	if err := e.cl.Create(ctx, old); err != nil {
		t.Fatalf("create OrderedReady statefulset: %v", err)
	}
	uids := map[string]types.UID{}
	for _, n := range []string{"om-0", "om-1"} {
		p, err := e.pod(n)
		if err != nil {
			t.Fatal(err)
		}
		uids[n] = p.UID
	}
	// As after an upgrade, the old StatefulSet owns the pods: deleted while
	// its controller is still adopting them, an orphaning delete can miss a
	// pod that is adopted just after, which then goes with it (seen in CI).
	e.c.WaitFor(t, "the OrderedReady statefulset adopted the pods", deadline, func(ctx context.Context) (bool, error) {
		for n := range uids {
			p, err := e.pod(n)
			if err != nil {
				return false, err
			}
			if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != old.UID {
				return false, fmt.Errorf("pod %s controlled by %v", n, ref)
			}
		}
		return true, nil
	})
	e.startManager()
	e.c.WaitFor(t, "statefulset om re-created with Parallel", deadline, func(ctx context.Context) (bool, error) {
		var got appsv1.StatefulSet
		if err := e.cl.Get(ctx, key, &got); err != nil {
			return false, err
		}
		return got.UID != old.UID && got.Spec.PodManagementPolicy == appsv1.ParallelPodManagement, fmt.Errorf("policy %s", got.Spec.PodManagementPolicy)
	})
	e.waitPinnedReady("om", 2)
	for n, uid := range uids {
		if p, err := e.pod(n); err != nil || p.UID != uid {
			t.Errorf("pod %s: %v, uid %s, want the running pod %s kept", n, err, p.UID, uid)
		}
	}
	if t.Failed() {
		evs, _ := e.c.Client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		for _, ev := range evs.Items {
			t.Logf("event %s %s/%s %s: %s", ev.LastTimestamp.Format("15:04:05.000"), ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	e.waitEvent("StatefulSetReplaced", "")
}

// TestReleasedVolumeRebound: a member whose claim was deleted (README's
// reclaim step 1, a reset) gets its data back when it returns: its
// Released volume is bound to the new claim, with an Event saying so.
func TestReleasedVolumeRebound(t *testing.T) {
	e := newEnv(t, 3)
	e.startManager()
	ctx := context.Background()
	if err := e.cl.Create(ctx, e.flock("rv", flockv1.ModeNodePinned, 2)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("rv", 2)
	vol1 := e.claimVolume("rv", 1)
	e.scale("rv", 1)
	e.c.WaitFor(t, "rv-1 gone", deadline, func(context.Context) (bool, error) {
		_, err := e.pod("rv-1")
		return apierrors.IsNotFound(err), err
	})
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: controller.ClaimName(e.get("rv"), "data", 1)}}
	if err := e.cl.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	e.c.WaitFor(t, "volume "+vol1+" Released", deadline, func(ctx context.Context) (bool, error) {
		var pv corev1.PersistentVolume
		if err := e.cl.Get(ctx, types.NamespacedName{Name: vol1}, &pv); err != nil {
			return false, err
		}
		return pv.Status.Phase == corev1.VolumeReleased, fmt.Errorf("phase %s", pv.Status.Phase)
	})
	e.scale("rv", 2)
	got := e.waitPinnedReady("rv", 2)
	if got[1] != nodes[1] || e.claimVolume("rv", 1) != vol1 {
		t.Errorf("member 1 on %s with volume %s, want its node %s and its old volume %s", got[1], e.claimVolume("rv", 1), nodes[1], vol1)
	}
	e.waitEvent("VolumeRebound", vol1)
}

// patchNode merge-patches node.
func (e *env) patchNode(node, patch string) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := e.cl.Patch(context.Background(), n, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		e.t.Fatalf("patch node %s with %s: %v", node, patch, err)
	}
}

// waitsFor waits until member ord of Flock name waits for reason, named in
// the Degraded condition.
func (e *env) waitsFor(name string, ord int32, reason string) {
	e.c.WaitFor(e.t, fmt.Sprintf("%s-%d waiting: %s", name, ord, reason), deadline, func(context.Context) (bool, error) {
		f := e.get(name)
		c := meta.FindStatusCondition(f.Status.Conditions, flockv1.ConditionDegraded)
		return members(f)[ord].Waiting == reason && c != nil && c.Status == metav1.ConditionTrue &&
			strings.Contains(c.Message, fmt.Sprintf("%s-%d", name, ord)), fmt.Errorf("member %+v, Degraded %+v", members(f)[ord], c)
	})
}

// TestStatusNamesEveryWait: a member whose node lost the selector label, or
// got a NoExecute taint the Flock does not tolerate, waits, and status says so.
func TestStatusNamesEveryWait(t *testing.T) {
	e := newEnv(t, 3)
	e.startManager()
	if err := e.cl.Create(context.Background(), e.flock("tw", flockv1.ModeNodePinned, 2)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("tw", 2)

	// The node loses the selector label: the running member keeps running
	// (not waiting); once its pod is gone it cannot come back there.
	e.patchNode(nodes[0], fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, poolKey))
	t.Cleanup(func() { e.patchNode(nodes[0], fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, poolKey, e.pool)) })
	e.lookAfter("tw", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodes[0]}}, func(o client.Object) bool { return o.GetLabels()[poolKey] == "" })
	if m := members(e.get("tw"))[0]; m.Waiting != "" || !m.Ready {
		t.Errorf("member 0 still running on its node: status %+v, want ready, not waiting", m)
	}
	e.deletePod("tw-0")
	e.waitsFor("tw", 0, controller.WaitNodeNotSelected)
	e.patchNode(nodes[0], fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, poolKey, e.pool))
	e.waitPinnedReady("tw", 2)

	// A NoExecute taint the Flock does not tolerate evicts the member.
	e.patchNode(nodes[1], fmt.Sprintf(`{"spec":{"taints":[{"key":%q,"value":%q,"effect":"NoSchedule"},{"key":"test.flockd.io/evict","effect":"NoExecute"}]}}`, poolKey, e.pool))
	t.Cleanup(func() {
		e.patchNode(nodes[1], fmt.Sprintf(`{"spec":{"taints":[{"key":%q,"value":%q,"effect":"NoSchedule"}]}}`, poolKey, e.pool))
	})
	e.waitsFor("tw", 1, controller.WaitNodeTainted)
	e.patchNode(nodes[1], fmt.Sprintf(`{"spec":{"taints":[{"key":%q,"value":%q,"effect":"NoSchedule"}]}}`, poolKey, e.pool))
	if got := e.waitPinnedReady("tw", 2); !maps.Equal(got, nodes) {
		t.Errorf("placement %v, want %v", got, nodes)
	}
}

// TestStorageOverlapRefused: a Flock whose storage directory lies inside
// another Flock's is refused before it creates a volume there.
func TestStorageOverlapRefused(t *testing.T) {
	e := newEnv(t, 2)
	e.startManager()
	ctx := context.Background()
	first := e.flock("ov", flockv1.ModeNodePinned, 1)
	first.Spec.Storage.Local = &flockv1.LocalStorage{Path: "/var/lib/flock-ov"}
	if err := e.cl.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	e.waitPinnedReady("ov", 1)
	// Its directory: /var/lib/flock-ov/<ns>/ov; the second one's would be
	// /var/lib/flock-ov/<ns>/ov/data-0/<ns>/in, inside member 0's data.
	second := e.flock("in", flockv1.ModeNodePinned, 1)
	second.Spec.Storage.Local = &flockv1.LocalStorage{Path: fmt.Sprintf("/var/lib/flock-ov/%s/ov/data-0", e.ns)}
	if err := e.cl.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	e.c.WaitFor(t, "flock in refused: StoragePathOverlap", deadline, func(context.Context) (bool, error) {
		if n := len(e.volumes("in")); n != 0 {
			t.Fatalf("%d volumes created for flock in inside flock ov's data", n)
		}
		c := meta.FindStatusCondition(e.get("in").Status.Conditions, flockv1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "StoragePathOverlap", fmt.Errorf("Degraded %+v", c)
	})
	e.waitEvent("StoragePathOverlap", "ov")
	e.lookAfter("in", nil, nil)
	if n := len(e.volumes("in")); n != 0 {
		t.Fatalf("%d volumes created for flock in inside flock ov's data", n)
	}
	e.waitPinnedReady("ov", 1) // the first one keeps working
}

// TestRecreatedFlockGetsItsDataBack: a Flock deleted together with its
// claims (as deleting its namespace does) and then created again finds its
// members' Released volumes: each member goes back to the node with its data
// and the volume is bound to the new claim.
func TestRecreatedFlockGetsItsDataBack(t *testing.T) {
	e := newEnv(t, 4)
	e.startManager()
	ctx := context.Background()
	if err := e.cl.Create(ctx, e.flock("rc", flockv1.ModeNodePinned, 2)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("rc", 2)
	vols := map[int32]string{0: e.claimVolume("rc", 0), 1: e.claimVolume("rc", 1)}
	if err := e.cl.Delete(ctx, e.get("rc")); err != nil {
		t.Fatal(err)
	}
	e.c.WaitFor(t, "members of rc gone", deadline, func(context.Context) (bool, error) {
		_, err0 := e.pod("rc-0")
		_, err1 := e.pod("rc-1")
		return apierrors.IsNotFound(err0) && apierrors.IsNotFound(err1), nil
	})
	if err := e.cl.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	e.c.WaitFor(t, "volumes of rc Released", deadline, func(context.Context) (bool, error) {
		for _, pv := range e.volumes("rc") {
			if pv.Status.Phase != corev1.VolumeReleased {
				return false, fmt.Errorf("%s %s", pv.Name, pv.Status.Phase)
			}
		}
		return true, nil
	})
	if err := e.cl.Create(ctx, e.flock("rc", flockv1.ModeNodePinned, 2)); err != nil {
		t.Fatal(err)
	}
	got := e.waitPinnedReady("rc", 2)
	for i := range int32(2) {
		if got[i] != nodes[i] || e.claimVolume("rc", i) != vols[i] {
			t.Errorf("member %d on %s with volume %s, want its node %s and its volume %s", i, got[i], e.claimVolume("rc", i), nodes[i], vols[i])
		}
	}
	if n := len(e.volumes("rc")); n != 2 {
		t.Errorf("%d volumes, want the 2 old ones (no new, empty ones)", n)
	}
}

// TestMovesOneAtATime: a reassign of two members moves them one after the
// other: at no moment are both members down, and the second starts only
// when the first is Ready on its new node.
func TestMovesOneAtATime(t *testing.T) {
	e := newEnv(t, 4)
	e.startManager()
	if err := e.cl.Create(context.Background(), e.flock("mo", flockv1.ModeNodePinned, 2)); err != nil {
		t.Fatal(err)
	}
	nodes := e.waitPinnedReady("mo", 2)
	var free []string
	for _, n := range e.nodes {
		if n != nodes[0] && n != nodes[1] {
			free = append(free, n)
		}
	}
	e.annotate("mo", flockv1.ReassignAnnotation, fmt.Sprintf("0=%s,1=%s", free[0], free[1]))
	e.c.WaitFor(t, "both members moved, one at a time", deadline, func(context.Context) (bool, error) {
		down := 0
		for _, n := range []string{"mo-0", "mo-1"} {
			if p, err := e.pod(n); err != nil || !ready(p) {
				down++
			}
		}
		if down == 2 {
			t.Fatalf("both members down at once during the moves (status %+v)", e.get("mo").Status.Members)
		}
		f := e.get("mo")
		m := members(f)
		if m[0].MovingFrom != "" && m[1].MovingFrom != "" {
			t.Fatalf("both members moving at once: %+v", f.Status.Members)
		}
		_, left := f.Annotations[flockv1.ReassignAnnotation]
		return !left && m[0].Node == free[0] && m[1].Node == free[1] && m[0].MovingFrom == "" && m[1].MovingFrom == "" && f.Status.ReadyReplicas == 2,
			fmt.Errorf("members %+v annotations %v", f.Status.Members, f.Annotations)
	})
	if got := e.waitPinnedReady("mo", 2); got[0] != free[0] || got[1] != free[1] {
		t.Errorf("placement %v, want members on %v", got, free)
	}
}
