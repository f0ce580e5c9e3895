package bootstrap

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/fixture"
	"github.com/flockd/flock/localcluster/clustertest"
	"github.com/flockd/flock/peerfinder"
	flockbootstrap "github.com/flockd/flock/peerfinder/bootstrap"
)

// TestExpectAutoWaitsForReplicasAndFollowsScale starts peer-finder before
// the StatefulSet's pods exist. Pods start one by one (OrderedReady, each
// ready after a second), so peer-finder sees 1, 2, then 3 members: with
// -expect=auto the first delivery must hold all 3, and after a scale to 5
// the 4-member set must be held back too.
func TestExpectAutoWaitsForReplicasAndFollowsScale(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, true)
	fixture.StatefulSet(t, c.Client, ns, 3, fixture.StatefulSetOptions{PodManagementPolicy: appsv1.OrderedReadyPodManagement, PodAnnotations: map[string]string{"test.flockd.io/ready-delay": "1s"}})

	h := newHook(t)
	p := pf{c: c, ns: ns, pod: "web-0", args: []string{
		"-kubeconfig=" + c.Kubeconfig, "-source=endpointslice", "-include-not-ready",
		"-expect=auto", "-on-change=" + h.command(),
	}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var stderr string
	go func() {
		code, _, e := p.main(ctx)
		stderr = e
		done <- code
	}()
	defer func() {
		cancel()
		if code := await.Recv(t, done, "peer-finder to exit after cancel"); code != peerfinder.ExitOK {
			t.Errorf("peer-finder exited %d:\n%s", code, stderr)
		}
	}()

	ds := h.waitDelivery(t, names("web", 3)...)
	if len(ds[0].peers) != 3 {
		t.Fatalf("first delivery has %v, want all 3 replicas", ds[0].peers)
	}
	fixture.Scale(t, c.Client, ns, 5)
	ds = h.waitDelivery(t, names("web", 5)...)
	for _, d := range ds {
		if len(d.peers) == 4 {
			t.Errorf("delivered %v while spec.replicas was 5", d.peers)
		}
	}
	fixture.Scale(t, c.Client, ns, 2)
	ds = h.waitDelivery(t, names("web", 2)...)
	for _, d := range ds {
		t.Logf("generation %d: %v", d.gen, d.peers)
	}
}

// TestBootstrapTimeoutExitsThree runs init mode with -expect=3 against a
// StatefulSet of 3 whose first pod never becomes ready, so (OrderedReady)
// the others are never created: peer-finder must give up with status 3
// without running the hook. (With -expect=auto, web-0 of an OrderedReady
// StatefulSet waits only for itself: TestExpectAutoOrderedReadyInitMode.)
func TestBootstrapTimeoutExitsThree(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, true)
	fixture.StatefulSet(t, c.Client, ns, 3, fixture.StatefulSetOptions{PodManagementPolicy: appsv1.OrderedReadyPodManagement, PodAnnotations: map[string]string{"test.flockd.io/ready": "false"}})
	fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")

	h := newHook(t)
	p := pf{c: c, ns: ns, pod: "web-0", args: []string{
		"-kubeconfig=" + c.Kubeconfig, "-source=endpointslice", "-include-not-ready",
		"-expect=3", "-bootstrap-timeout=3s", "-on-start=" + h.command(),
	}}
	began := time.Now()
	code, _, stderr := p.main(t.Context())
	if code != peerfinder.ExitBootstrapTimeout {
		t.Fatalf("exit status %d, want %d:\n%s", code, peerfinder.ExitBootstrapTimeout, stderr)
	}
	if took := time.Since(began); took < 3*time.Second || took > 30*time.Second {
		t.Errorf("gave up after %s, want about 3s", took)
	}
	if ds := h.deliveries(t); len(ds) != 0 {
		t.Errorf("hook ran: %v", ds)
	}
	if !strings.Contains(stderr, "bootstrap timeout") || !strings.Contains(stderr, "too-few-peers") {
		t.Errorf("log does not say why:\n%s", stderr)
	}
}

// TestPodZeroThatLostItsDataJoins is the split-brain scenario: pod-0 forms
// the cluster, then is deleted and re-created (as with a lost volume). With
// -cluster-lease the new pod-0 is told join; without it, form (the limit
// the documentation states).
func TestPodZeroThatLostItsDataJoins(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, true)
	fixture.StatefulSet(t, c.Client, ns, 2, fixture.StatefulSetOptions{})
	first := fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")
	fixture.WaitRunningPod(t, c.Client, ns, "web-1", "")

	initRun := func(pod string, lease bool) (string, string) {
		t.Helper()
		h := newHook(t)
		args := []string{"-kubeconfig=" + c.Kubeconfig, "-source=endpointslice", "-include-not-ready", "-expect=auto", "-on-start=" + h.command()}
		if lease {
			args = append(args, "-cluster-lease=web-cluster")
		}
		p := pf{c: c, ns: ns, pod: pod, args: args}
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		code, _, stderr := p.main(ctx)
		ds := h.deliveries(t)
		if code != peerfinder.ExitOK || len(ds) != 1 {
			t.Fatalf("%s: exit %d, deliveries %v:\n%s", pod, code, ds, stderr)
		}
		return ds[0].role, stderr
	}

	if role, log := initRun("web-0", true); role != "form" {
		t.Fatalf("first pod-0: role %q, want form:\n%s", role, log)
	}
	lease, err := c.Client.CoordinationV1().Leases(ns).Get(t.Context(), "web-cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *lease.Spec.HolderIdentity != "web-0" || lease.Annotations[flockbootstrap.AnnotationUID] != string(first.UID) {
		t.Errorf("lease holder %q uid %q, want web-0 uid %s", *lease.Spec.HolderIdentity, lease.Annotations[flockbootstrap.AnnotationUID], first.UID)
	}
	if role, log := initRun("web-1", true); role != "join" {
		t.Fatalf("pod-1: role %q, want join:\n%s", role, log)
	}
	if role, log := initRun("web-0", true); role != "form" {
		t.Fatalf("same pod-0 again (container restart): role %q, want form:\n%s", role, log)
	}

	// pod-0 loses its data: the pod is deleted and the StatefulSet
	// controller re-creates it with a new UID.
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).Delete(t.Context(), "web-0", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	again := fixture.WaitRunningPod(t, c.Client, ns, "web-0", string(first.UID))
	if role, log := initRun("web-0", true); role != "join" {
		t.Fatalf("re-created pod-0 (uid %s): role %q, want join:\n%s", again.UID, role, log)
	}
	if role, _ := initRun("web-0", false); role != "form" {
		t.Errorf("re-created pod-0 without -cluster-lease: role %q, want form (the documented limit)", role)
	}

	// diagnose predicts the same without writing anything.
	p := pf{c: c, ns: ns, pod: "web-0", args: []string{"-kubeconfig=" + c.Kubeconfig, "-source=endpointslice", "-include-not-ready", "-expect=auto", "-cluster-lease=web-cluster", "-diagnose"}}
	code, out, stderr := p.main(t.Context())
	if code != peerfinder.ExitOK || !strings.Contains(out, "bootstrap: join (formed-by-other)") || !strings.Contains(out, "expect:    2 (spec.replicas of StatefulSet web") {
		t.Errorf("diagnose exit %d:\n%s\n%s", code, out, stderr)
	}
	t.Logf("peer-finder -diagnose:\n%s", out)
}

// TestLeaseClaimRace has many members claim the same Lease at once on the
// real API server: exactly one wins and all agree on it.
func TestLeaseClaimRace(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	l := &flockbootstrap.Lease{Leases: clientset.Wrap(c.Client).Leases, Namespace: ns, Name: "race"}
	const n = 10
	got := make([]*flockbootstrap.Record, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	ctx, cancel := context.WithTimeout(t.Context(), wait) // bounds wg.Wait
	defer cancel()
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = l.Claim(ctx, flockbootstrap.Record{Pod: fmt.Sprintf("m-%d", i), UID: fmt.Sprintf("u-%d", i)}, "")
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if got[i].Pod != got[0].Pod || got[i].UID != got[0].UID {
			t.Errorf("claim %d sees %v, claim 0 sees %v", i, got[i], got[0])
		}
	}
	rec, err := l.Read(t.Context())
	if err != nil || rec.Pod != got[0].Pod || rec.UID != got[0].UID {
		t.Errorf("lease holds %v (%v), claims saw %v", rec, err, got[0])
	}
	winners := slices.IndexFunc(got, func(r *flockbootstrap.Record) bool { return r.UID == "" })
	if winners >= 0 {
		t.Errorf("a claim returned a record without UID")
	}
}

// TestExpectAutoOrderedReadyInitMode: an OrderedReady StatefulSet creates
// web-1 only once web-0 is Ready, and web-0 is not Ready while its init
// container waits. So in init mode -expect=auto makes web-0 wait for itself
// alone (and form), not for spec.replicas, which could never be visible.
// Before, web-0 waited for 3 until -bootstrap-timeout (this setup was
// TestBootstrapTimeoutExitsThree's); on the real node every OrderedReady
// etcd round of the campaign was stuck so.
func TestExpectAutoOrderedReadyInitMode(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, true)
	fixture.StatefulSet(t, c.Client, ns, 3, fixture.StatefulSetOptions{PodManagementPolicy: appsv1.OrderedReadyPodManagement, PodAnnotations: map[string]string{"test.flockd.io/ready": "false"}})
	fixture.WaitRunningPod(t, c.Client, ns, "web-0", "")

	h := newHook(t)
	p := pf{c: c, ns: ns, pod: "web-0", args: []string{
		"-kubeconfig=" + c.Kubeconfig, "-source=endpointslice", "-include-not-ready",
		"-expect=auto", "-bootstrap-timeout=30s", "-on-start=" + h.command(),
	}}
	code, _, stderr := p.main(t.Context())
	ds := h.deliveries(t)
	if code != peerfinder.ExitOK || len(ds) != 1 {
		t.Fatalf("exit status %d, deliveries %v, want 0 and one:\n%s", code, ds, stderr)
	}
	if want := names("web", 1); !slices.Equal(ds[0].peers, want) || ds[0].role != "form" {
		t.Errorf("delivered %v role %q, want %v and form", ds[0].peers, ds[0].role, want)
	}
}
