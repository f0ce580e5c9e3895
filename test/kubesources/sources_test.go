package kubesources

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/fixture"
	"github.com/flockd/flock/localcluster/clustertest"
	"github.com/flockd/flock/peerfinder/source/endpointslice"
)

// TestScaleStatefulSet: 3 -> 5 -> 2, seen by every source.
func TestScaleStatefulSet(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, false)
	fixture.StatefulSet(t, c.Client, ns, 3, fixture.StatefulSetOptions{})
	s := start(t, c, ns, slog.New(slog.DiscardHandler))
	for _, n := range []int{3, 5, 2} {
		fixture.Scale(t, c.Client, ns, int32(n))
		for _, w := range s.all() {
			ps := w.waitNames(t, ordinals("web", upto(n)...)...)
			if w == s.dns {
				continue
			}
			// The -include-not-ready watchers may see a new member before
			// it is ready: that is what they are for.
			notReadyToo := w == s.endpointsliceNotReady || w == s.podsNotReady
			for _, p := range ps {
				if len(p.IPs) == 0 || p.Node == "" || p.Pod != p.Name || p.UID == "" || p.Ordinal < 0 || (!p.Ready && !notReadyToo) {
					t.Errorf("%s: incomplete peer %+v", w.name, p)
				}
				if w == s.endpointslice && p.Zone == "" {
					t.Errorf("%s: no zone in %+v", w.name, p)
				}
				if !strings.HasSuffix(p.FQDN, ".web."+ns+".svc."+c.Domain) {
					t.Errorf("%s: FQDN %s", w.name, p.FQDN)
				}
			}
		}
	}
}

// TestNotReady: a not-ready member is left out unless asked for, in both
// API sources, with a service that does not publish not-ready addresses.
func TestNotReady(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, false)
	fixture.StatefulSet(t, c.Client, ns, 3, fixture.StatefulSetOptions{})
	s := start(t, c, ns, slog.New(slog.DiscardHandler))
	for _, w := range s.all() {
		w.waitNames(t, "web-0", "web-1", "web-2")
	}
	c.SetPodReady(t, ns, "web-1", false)
	s.endpointslice.waitNames(t, "web-0", "web-2")
	s.pods.waitNames(t, "web-0", "web-2")
	s.dns.waitNames(t, "web-0", "web-2")
	for _, w := range []*watcher{s.endpointsliceNotReady, s.podsNotReady} {
		ps := w.waitNames(t, "web-0", "web-1", "web-2")
		if ps[1].Ready {
			t.Errorf("%s: web-1 reported ready: %+v", w.name, ps[1])
		}
	}
	// And back.
	c.SetPodReady(t, ns, "web-1", true)
	for _, w := range s.all() {
		w.waitNames(t, "web-0", "web-1", "web-2")
	}
}

// TestTerminatingLeavesWithPublishNotReady: with publishNotReadyAddresses a
// terminating endpoint still says ready=true; it must leave the set anyway.
func TestTerminatingLeavesWithPublishNotReady(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, true)
	fixture.StatefulSet(t, c.Client, ns, 2, fixture.StatefulSetOptions{PodAnnotations: map[string]string{clustertest.AnnotationTerminateAfter: "20s"}})
	s := start(t, c, ns, slog.New(slog.DiscardHandler))
	s.endpointsliceNotReady.waitNames(t, "web-0", "web-1")
	s.endpointslice.waitNames(t, "web-0", "web-1")
	fixture.Scale(t, c.Client, ns, 1)
	// Removed while the pod still terminates (20s) and its endpoint is listed.
	s.endpointslice.waitNames(t, "web-0")
	s.endpointsliceNotReady.waitNames(t, "web-0")
	s.pods.waitNames(t, "web-0")
	sl, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	terminating := 0
	for _, es := range sl.Items {
		for _, e := range es.Endpoints {
			if e.Conditions.Terminating != nil && *e.Conditions.Terminating {
				terminating++
			}
		}
	}
	if terminating == 0 {
		t.Log("the terminating endpoint was already gone; the case was not exercised")
	}
}

// TestPodRecreatedWithNewIdentity: a deleted member comes back as a new pod
// (new UID, maybe a new IP); every API source reports the new one.
func TestPodRecreatedWithNewIdentity(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, false)
	fixture.StatefulSet(t, c.Client, ns, 3, fixture.StatefulSetOptions{})
	s := start(t, c, ns, slog.New(slog.DiscardHandler))
	before := s.pods.waitNames(t, "web-0", "web-1", "web-2")
	s.endpointslice.waitNames(t, "web-0", "web-1", "web-2")
	oldUID := before[1].UID
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod struct{ uid, ip string }
	c.WaitFor(t, "web-1 re-created and running", wait, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "web-1", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod.uid, pod.ip = string(p.UID), p.Status.PodIP
		return pod.uid != oldUID && pod.ip != "" && p.DeletionTimestamp == nil, nil
	})
	for _, w := range []*watcher{s.pods, s.endpointslice} {
		await.Poll{Timeout: wait, Every: 50 * time.Millisecond}.Check(t, func() error {
			ps, _ := w.Latest()
			var got string
			var ips []string
			for _, p := range ps {
				if p.Name == "web-1" {
					got, ips = p.UID, p.IPs
				}
			}
			if got != pod.uid || !slices.Equal(ips, []string{pod.ip}) {
				return fmt.Errorf("web-1 is uid %s ips %v", got, ips)
			}
			return nil
		}, "%s: web-1 the new pod %s %s", w.name, pod.uid, pod.ip)
	}
}

// TestAPIServerRestart: the sources survive a kube-apiserver restart without
// losing or inventing members, and follow changes made after it.
func TestAPIServerRestart(t *testing.T) {
	c := clustertest.Private(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, false)
	fixture.StatefulSet(t, c.Client, ns, 3, fixture.StatefulSetOptions{})
	var logs logBuffer
	s := start(t, c, ns, testLogger(t, &logs))
	for _, w := range s.all() {
		w.waitNames(t, "web-0", "web-1", "web-2")
	}
	seen := map[*watcher]int{}
	for _, w := range s.all() {
		seen[w] = len(w.Snapshots())
	}
	c.RestartAPIServer(t)
	fixture.Scale(t, c.Client, ns, 4)
	for _, w := range s.all() {
		w.waitNames(t, "web-0", "web-1", "web-2", "web-3")
		// Every snapshot since the restart is the old set or the new one.
		for _, ps := range w.Snapshots()[seen[w]:] {
			got := strings.Join(names(ps), ",")
			if got != "web-0,web-1,web-2" && got != "web-0,web-1,web-2,web-3" {
				t.Errorf("%s: snapshot %s around the restart", w.name, got)
			}
		}
	}
	t.Logf("logs:\n%s", strings.Join(logs.lines(""), ""))
}

// TestForbidden: without RBAC the source logs one clear line naming the
// missing permission and retries with backoff; granting the Role recovers.
func TestForbidden(t *testing.T) {
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	fixture.HeadlessService(t, c.Client, ns, false)
	fixture.StatefulSet(t, c.Client, ns, 2, fixture.StatefulSetOptions{})
	cfg := c.ServiceAccountConfig(t, ns) // no rules: may do nothing
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user := review.Status.UserInfo.Username // system:serviceaccount:<ns>:<name>
	sa := user[strings.LastIndexByte(user, ':')+1:]

	var logs logBuffer
	metrics := kube.NewMetrics(prometheus.NewPedanticRegistry())
	const res = "endpointslices.discovery.k8s.io"
	kc, err := kube.NewClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := endpointslice.New(endpointslice.Config{Client: kc, Logger: testLogger(t, &logs), Metrics: metrics,
		Options: endpointslice.Options{Service: "web", Namespace: ns, Domain: c.Domain}})
	if err != nil {
		t.Fatal(err)
	}
	w := run(t, "endpointslice", src)
	c.WaitFor(t, "the forbidden log line", wait, func(context.Context) (bool, error) {
		return len(logs.lines("forbids")) > 0, nil
	})
	forbiddenFailures := func() float64 {
		return testutil.ToFloat64(metrics.Failures.WithLabelValues(res, "list", "forbidden")) +
			testutil.ToFloat64(metrics.Failures.WithLabelValues(res, "watch", "forbidden"))
	}
	// Several retries (backoff from 800ms), each counted.
	await.Poll{Timeout: wait, Every: 100 * time.Millisecond}.Until(t, func() bool { return forbiddenFailures() >= 3 },
		"3 forbidden failures counted in flock_kube_list_watch_failures_total")
	lines := logs.lines("forbids")
	if len(lines) != 1 {
		t.Fatalf("want one forbidden line, got %d:\n%s", len(lines), strings.Join(lines, ""))
	}
	for _, want := range []string{"level=ERROR", "verb=", "resource=endpointslices.discovery.k8s.io", "namespace=" + ns, "serviceaccount=" + ns + "/" + sa, "kubectl"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("forbidden line lacks %q: %s", want, lines[0])
		}
	}
	if _, ok := w.Latest(); ok {
		t.Error("a snapshot was sent while forbidden")
	}
	// Every retry is counted (awaited above), the log line is not repeated.
	if v := testutil.ToFloat64(metrics.Failing.WithLabelValues(res)); v != 1 {
		t.Errorf("flock_kube_list_watch_failing = %v while forbidden, want 1", v)
	}

	// Grant the least privilege and expect recovery.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "peer-finder"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: endpointslice.Verbs}}}
	if _, err := c.Client.RbacV1().Roles(ns).Create(context.Background(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "peer-finder"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "peer-finder"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitNames(t, "web-0", "web-1")
	if n := len(logs.lines("forbids")); n != 1 {
		t.Errorf("%d forbidden lines in all, want 1", n)
	}
	if n := len(logs.lines("succeed again")); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, strings.Join(logs.lines(""), ""))
	}
	if v := testutil.ToFloat64(metrics.Failing.WithLabelValues(res)); v != 0 {
		t.Errorf("flock_kube_list_watch_failing = %v after recovery, want 0", v)
	}
	if n := testutil.ToFloat64(metrics.Relists.WithLabelValues(res)); n != 0 {
		t.Errorf("flock_kube_relists_total = %v, want 0 (no list succeeded before)", n)
	}
	t.Logf("logs:\n%s", strings.Join(logs.lines(""), ""))
}
