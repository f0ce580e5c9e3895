package bootstrap

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/peerfinder/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLeaseClaimAndRead(t *testing.T) {
	ctx := t.Context()
	c := fake.NewClientset()
	l := &Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"}
	if rec, err := l.Read(ctx); err != nil || rec != nil {
		t.Fatalf("Read() on no lease = %v, %v; want nil, nil", rec, err)
	}
	got, err := l.Claim(ctx, Record{Pod: "db-0", UID: "u0"}, fqdn("db-0"))
	if err != nil || former(got) != (formed{Pod: "db-0", UID: "u0"}) {
		t.Fatalf("first Claim() = %v, %v", got, err)
	}
	got, err = l.Claim(ctx, Record{Pod: "db-0", UID: "u0-new"}, fqdn("db-0"))
	if err != nil || former(got) != (formed{Pod: "db-0", UID: "u0"}) {
		t.Fatalf("second Claim() = %v, %v; want the first record kept", got, err)
	}
	if rec, err := l.Read(ctx); err != nil || former(rec) != (formed{Pod: "db-0", UID: "u0"}) || rec.Member != fqdn("db-0") {
		t.Fatalf("Read() = %+v, %v; want db-0, u0, member %s", rec, err, fqdn("db-0"))
	}
	// The roles carry the former read from the Lease.
	for _, pod := range []string{"db-0", "db-1"} {
		r := &Roler{Lease: l, Pod: pod, UID: "u-" + pod}
		if pod == "db-0" {
			r.UID = "u0"
		}
		set := peer.NewSet(member("db-0", 0), member("db-1", 1))
		if _, got, err := r.Bootstrap(ctx, set, fqdn(pod)); err != nil || got != fqdn("db-0") {
			t.Errorf("%s: former = %q, %v; want %s", pod, got, err, fqdn("db-0"))
		}
	}
	obj, err := c.CoordinationV1().Leases("ns").Get(ctx, "db-formed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if obj.Spec.LeaseDurationSeconds != nil || obj.Annotations[AnnotationMember] != fqdn("db-0") || obj.Labels[LabelManagedBy] != "peer-finder" {
		t.Errorf("lease = %+v", obj)
	}
}

func TestLeaseClaimFillsEmptyLease(t *testing.T) {
	ctx := t.Context()
	c := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "db-formed", Namespace: "ns"}})
	l := &Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"}
	if rec, err := l.Read(ctx); err != nil || rec != nil {
		t.Fatalf("Read() on empty lease = %v, %v; want nil", rec, err)
	}
	got, err := l.Claim(ctx, Record{Pod: "db-0", UID: "u0"}, "")
	if err != nil || former(got) != (formed{Pod: "db-0", UID: "u0"}) {
		t.Fatalf("Claim() = %v, %v", got, err)
	}
}

func TestLeaseOpenThenClaim(t *testing.T) {
	ctx := t.Context()
	l := &Lease{Leases: clientset.Wrap(fake.NewClientset()).Leases, Namespace: "ns", Name: "db-formed"}
	joiner := []Member{{Pod: "db-1", UID: "u1"}}
	if err := l.Open(ctx, joiner); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Read(ctx)
	if err != nil || rec == nil || rec.Pod != "" || len(rec.Members) != 1 {
		t.Fatalf("Read() after Open = %+v, %v; want no former and the joiner", rec, err)
	}
	if err := l.Open(ctx, joiner); !errors.Is(err, ErrChanged) {
		t.Fatalf("second Open() = %v, want ErrChanged", err)
	}
	// Claim would drop the joiner: it leaves the record to Replace.
	if got, err := l.Claim(ctx, Record{Pod: "db-0", UID: "u0"}, ""); !errors.Is(err, ErrChanged) {
		t.Fatalf("Claim() over listed joiners = %v, %v; want ErrChanged", got, err)
	}
}

func TestRolerPodZeroLostItsData(t *testing.T) {
	ctx := t.Context()
	c := fake.NewClientset()
	lease := &Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"}
	set := peer.NewSet(member("db-0", 0), member("db-1", 1))
	steps := []struct {
		pod, uid string
		want     string
	}{
		{"db-1", "u1", "join"},     // not first: no claim
		{"db-0", "u0", "form"},     // first: claims
		{"db-0", "u0", "form"},     // same pod again (retry/restart)
		{"db-0", "u0-new", "join"}, // re-created with empty data
		{"db-1", "u1", "join"},
	}
	for i, s := range steps {
		r := &Roler{Lease: lease, Pod: s.pod, UID: s.uid}
		got, err := r.Role(ctx, set, fqdn(s.pod))
		if err != nil || got != s.want {
			t.Fatalf("step %d: %s (uid %s) Role() = %q, %v; want %q", i, s.pod, s.uid, got, err, s.want)
		}
	}
	// Without the record, the re-created pod-0 cannot be told apart.
	r := &Roler{Pod: "db-0", UID: "u0-new"}
	if got, _ := r.Role(ctx, set, fqdn("db-0")); got != "form" {
		t.Fatalf("without a lease Role() = %q, want form (the documented limit)", got)
	}
}

func statefulSet(name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "ss-uid"},
		Spec:       appsv1.StatefulSetSpec{Replicas: &replicas},
	}
}

func ownedPod(name string, owner *appsv1.StatefulSet) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")}}
	if owner != nil {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: owner.Name, UID: owner.UID, Controller: &yes}}
	}
	return p
}

func TestReplicasFollowsScale(t *testing.T) {
	ss := statefulSet("db", 3)
	c := fake.NewClientset(ss, ownedPod("db-0", ss), statefulSet("other", 7))
	r := &Replicas{Client: clientset.Wrap(c), Namespace: "ns", Pod: "db-0"}
	ctx, cancel := context.WithCancel(t.Context())
	up := make(chan int)
	errc := make(chan error)
	go func() { errc <- r.Run(ctx, up) }()
	expect := func(want int) {
		t.Helper()
		select {
		case n := <-up:
			if n != want {
				t.Fatalf("size = %d, want %d", n, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no size, want %d", want)
		}
	}
	expect(3)
	if r.StatefulSet() != "db" {
		t.Errorf("StatefulSet() = %q", r.StatefulSet())
	}
	ss = ss.DeepCopy()
	five := int32(5)
	ss.Spec.Replicas = &five
	ss.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 2}
	if _, err := c.AppsV1().StatefulSets("ns").Update(ctx, ss, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(5)
	if r.FirstOrdinal() != 2 {
		t.Errorf("FirstOrdinal() = %d, want 2", r.FirstOrdinal())
	}
	cancel()
	if err := await.Recv(t, errc, "Run to return after cancel"); err != nil {
		t.Fatalf("Run() = %v", err)
	}
}

func TestReplicasWithoutStatefulSetOwner(t *testing.T) {
	c := fake.NewClientset(ownedPod("api-7d9f", nil))
	r := &Replicas{Client: clientset.Wrap(c), Namespace: "ns", Pod: "api-7d9f"}
	err := r.Run(t.Context(), make(chan int))
	if !errors.Is(err, ErrNoStatefulSet) {
		t.Fatalf("Run() = %v, want ErrNoStatefulSet", err)
	}
}

func TestReplicasRetriesUntilPodExists(t *testing.T) {
	ss := statefulSet("db", 2)
	c := fake.NewClientset(ss)
	r := &Replicas{Client: clientset.Wrap(c), Namespace: "ns", Pod: "db-1", RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	up := make(chan int)
	errc := make(chan error, 1)
	var gets atomic.Int32
	c.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { gets.Add(1); return false, nil, nil })
	go func() { errc <- r.Run(ctx, up) }()
	// The pod is missing for a retry or two first.
	await.Until(t, func() bool { return gets.Load() >= 2 }, "Run to read the missing pod twice")
	if _, err := c.CoreV1().Pods("ns").Create(ctx, ownedPod("db-1", ss), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-up:
		if n != 2 {
			t.Fatalf("size = %d, want 2", n)
		}
	case err := <-errc:
		t.Fatalf("Run() = %v before a size", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no size")
	}
	cancel()
	await.Recv(t, errc, "Run to return after cancel")
}

func TestRolerKeepsItsRoleWhenTheLeaseIsUnreadable(t *testing.T) {
	ctx := t.Context()
	c := fake.NewClientset()
	var down atomic.Bool
	c.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	r := &Roler{Lease: &Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"}, Pod: "db-0", UID: "u0"}
	set := peer.NewSet(member("db-0", 0))
	down.Store(true)
	if got, err := r.Role(ctx, set, fqdn("db-0")); err == nil {
		t.Fatalf("Role() with the API down before any decision = %q, want an error", got)
	}
	down.Store(false)
	if got, err := r.Role(ctx, set, fqdn("db-0")); err != nil || got != "form" {
		t.Fatalf("Role() = %q, %v; want form", got, err)
	}
	down.Store(true)
	if got, err := r.Role(ctx, peer.NewSet(member("db-0", 0), member("db-1", 1)), fqdn("db-0")); err != nil || got != "form" {
		t.Fatalf("Role() with the API down after a decision = %q, %v; want the kept form", got, err)
	}
}

// formed is who a record says formed the cluster.
type formed struct{ Pod, UID string }

func former(r *Record) formed { return formed{Pod: r.Pod, UID: r.UID} }

// TestRolerFormerReplacedWithItsClaim: pod-0 formed (recorded with its
// claim), then was replaced before anyone joined, its claim kept. The new
// pod-0 mounts the former's claim: it is told form and becomes the recorded
// former (before, it was told join, and so was everyone: nobody to join).
// A pod-0 whose claim was re-created (data lost) is still told join.
func TestRolerFormerReplacedWithItsClaim(t *testing.T) {
	ctx := t.Context()
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-db-0", Namespace: "ns", UID: "c0"}}
	pod := func(uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "ns", UID: types.UID(uid)}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}},
		}}}
	}
	c := fake.NewClientset(claim, pod("u0"))
	lease := &Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"}
	set := peer.NewSet(member("db-0", 0), member("db-1", 1))
	role := func(uid string) string {
		t.Helper()
		r := &Roler{Lease: lease, Data: &Data{Client: clientset.Wrap(c), Namespace: "ns"}, Pod: "db-0"}
		got, err := r.Role(ctx, set, fqdn("db-0"))
		if err != nil {
			t.Fatalf("pod-0 uid %s: %v", uid, err)
		}
		return got
	}
	replace := func(uid string) {
		t.Helper()
		if err := c.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), pod(uid), "ns"); err != nil {
			t.Fatal(err)
		}
	}
	if got := role("u0"); got != "form" {
		t.Fatalf("first pod-0: %q, want form", got)
	}
	replace("u0-new")
	if got := role("u0-new"); got != "form" {
		t.Fatalf("pod-0 replaced, its claim kept: %q, want form", got)
	}
	rec, err := lease.Read(ctx)
	if err != nil || rec == nil || rec.UID != "u0-new" || len(rec.Members) != 1 || rec.Members[0].UID != "u0-new" {
		t.Fatalf("record after the replacement: %+v, %v; want the new pod-0 as the former and only member", rec, err)
	}
	// db-1 joins with a claim of its own; then pod-0's claim is lost
	// (re-created with a new UID) and the pod replaced: db-1 holds the
	// cluster's data, so pod-0 must join.
	c1 := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-db-1", Namespace: "ns", UID: "c1"}}
	p1 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns", UID: "u1"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-1"}}},
	}}}
	for _, o := range []runtime.Object{c1, p1} {
		if err := c.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	r1 := &Roler{Lease: lease, Data: &Data{Client: clientset.Wrap(c), Namespace: "ns"}, Pod: "db-1"}
	if got, err := r1.Role(ctx, set, fqdn("db-1")); err != nil || got != "join" {
		t.Fatalf("db-1: %q, %v; want join", got, err)
	}
	claim.UID = "c0-new"
	if err := c.Tracker().Update(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), claim, "ns"); err != nil {
		t.Fatal(err)
	}
	replace("u0-newer")
	if got := role("u0-newer"); got != "join" {
		t.Fatalf("pod-0 with a new claim while db-1 keeps its data: %q, want join", got)
	}
}

// TestRolerJoinerBeforeTheFormer: in a Parallel start a member can be told
// to join before the first ordinal wrote the record. It must still be in
// the record's members, or a pod-0 that later loses its data finds every
// recorded member gone and forms a second cluster (the etcd campaign's
// round 31 of run 6, with DNS down so the script's own check failed too).
func TestRolerJoinerBeforeTheFormer(t *testing.T) {
	ctx := t.Context()
	claim := func(name, uid string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)}}
	}
	pod := func(name, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}},
		}}}
	}
	c := fake.NewClientset(claim("data-db-0", "c0"), pod("db-0", "u0"), claim("data-db-1", "c1"), pod("db-1", "u1"), claim("data-db-2", "c2"), pod("db-2", "u2"))
	lease := &Lease{Leases: clientset.Wrap(c).Leases, Namespace: "ns", Name: "db-formed"}
	set := peer.NewSet(member("db-0", 0), member("db-1", 1), member("db-2", 2))
	role := func(name string) string {
		t.Helper()
		r := &Roler{Lease: lease, Data: &Data{Client: clientset.Wrap(c), Namespace: "ns"}, Pod: name}
		got, err := r.Role(ctx, set, fqdn(name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return got
	}
	for _, name := range []string{"db-1", "db-2"} {
		if got := role(name); got != "join" {
			t.Fatalf("%s before any record: %q, want join", name, got)
		}
	}
	if got := role("db-0"); got != "form" {
		t.Fatalf("db-0 after the others: %q, want form", got)
	}
	rec, err := lease.Read(ctx)
	if err != nil || rec == nil {
		t.Fatalf("record: %+v, %v", rec, err)
	}
	var names []string
	for _, m := range rec.Members {
		names = append(names, m.Pod)
	}
	if slices.Sort(names); rec.UID != "u0" || !slices.Equal(names, []string{"db-0", "db-1", "db-2"}) {
		t.Errorf("record: formed by %s (uid %s), members %q; want db-0 (u0) and all three", rec.Pod, rec.UID, names)
	}
	// pod-0 loses its data: its claim re-created, its pod replaced.
	for _, o := range []runtime.Object{claim("data-db-0", "c0-new"), pod("db-0", "u0-new")} {
		gvr := corev1.SchemeGroupVersion.WithResource("pods")
		if _, ok := o.(*corev1.PersistentVolumeClaim); ok {
			gvr = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
		}
		if err := c.Tracker().Update(gvr, o, "ns"); err != nil {
			t.Fatal(err)
		}
	}
	if got := role("db-0"); got != "join" {
		t.Fatalf("pod-0 with a new claim while db-1 and db-2 keep their data: %q, want join", got)
	}
}
