package pods

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flockd/flock/internal/kube/clientset"
	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/internal/testing/await"
	"github.com/flockd/flock/internal/testing/sourcetest"
	"github.com/flockd/flock/peerfinder/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var opts = Options{Service: "web", Namespace: "db", Domain: "cluster.local"}

type podOpt func(*corev1.Pod)

func pod(name string, ip string, o ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "db", UID: types.UID("uid-" + name),
			Labels:            map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(time.Unix(1000, 0)),
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{
			Name: "c", Ports: []corev1.ContainerPort{{Name: "peer", ContainerPort: 2888, Protocol: corev1.ProtocolTCP}},
		}}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	if ip != "" {
		p.Status.PodIP = ip
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	for _, f := range o {
		f(p)
	}
	return p
}

func notReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
func sts(sub string, index string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Hostname, p.Spec.Subdomain = p.Name, sub
		p.Labels[ordinal.PodIndexLabel] = index
	}
}
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func deleting(p *corev1.Pod)          { now := metav1.Now(); p.DeletionTimestamp = &now }
func uid(u string) podOpt             { return func(p *corev1.Pod) { p.UID = types.UID(u) } }
func created(sec int64) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(time.Unix(sec, 0)) }
}

func slims(t *testing.T, ps ...*corev1.Pod) []*Pod {
	t.Helper()
	var out []*Pod
	for _, p := range ps {
		o, err := Slim(clientset.SlimPodFrom(p))
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := Slim(o); again != o {
			t.Fatal("Slim is not idempotent")
		}
		out = append(out, o.(*Pod))
	}
	return out
}

func keys(ps []peer.Peer) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.FQDN+"="+p.UID)
	}
	return out
}

func TestPeers(t *testing.T) {
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		notReady bool
		want     []string
	}{
		{"none", nil, false, []string{}},
		{"running ready", []*corev1.Pod{pod("a-1", "10.0.0.1")}, false, []string{"a-1.web.db.svc.cluster.local=uid-a-1"}},
		{"not ready excluded", []*corev1.Pod{pod("a-1", "10.0.0.1", notReady)}, false, []string{}},
		{"not ready included", []*corev1.Pod{pod("a-1", "10.0.0.1", notReady)}, true, []string{"a-1.web.db.svc.cluster.local=uid-a-1"}},
		{"failed, succeeded skipped", []*corev1.Pod{
			pod("b", "10.0.0.2", phase(corev1.PodFailed)),
			pod("c", "10.0.0.3", phase(corev1.PodSucceeded))}, true, []string{}},
		// A pod running its init containers is Pending with an IP: an
		// init-mode peer-finder of a batch job waits for exactly these.
		{"pending with IP included with not-ready", []*corev1.Pod{
			pod("a", "10.0.0.1", phase(corev1.PodPending), notReady), pod("b", "", phase(corev1.PodPending), notReady)}, true,
			[]string{"a.web.db.svc.cluster.local=uid-a"}},
		{"pending excluded without not-ready", []*corev1.Pod{pod("a", "10.0.0.1", phase(corev1.PodPending), notReady)}, false, []string{}},
		{"terminating skipped", []*corev1.Pod{pod("a", "10.0.0.1", deleting)}, true, []string{}},
		{"no IP skipped", []*corev1.Pod{pod("a", "")}, true, []string{}},
		{"hostname and subdomain name the pod", []*corev1.Pod{pod("zk-0", "10.0.0.1", sts("zk-hs", "0"))}, false,
			[]string{"zk-0.zk-hs.db.svc.cluster.local=uid-zk-0"}},
		{"reused IP never aliases", []*corev1.Pod{
			pod("old", "10.0.0.1", phase(corev1.PodFailed)), pod("new", "10.0.0.1")}, false,
			[]string{"new.web.db.svc.cluster.local=uid-new"}},
		{"same name: ready wins", []*corev1.Pod{
			pod("x", "10.0.0.1", uid("u1"), notReady, created(2000)), pod("x", "10.0.0.2", uid("u2"))}, true,
			[]string{"x.web.db.svc.cluster.local=u2"}},
		{"same name: newer wins", []*corev1.Pod{
			pod("x", "10.0.0.2", uid("u2"), created(2000)), pod("x", "10.0.0.1", uid("u1"))}, false,
			[]string{"x.web.db.svc.cluster.local=u2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			o.IncludeNotReady = tt.notReady
			if got := keys(Peers(slims(t, tt.pods...), o)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPeerOfFields(t *testing.T) {
	p := pod("zk-2", "10.0.0.3", sts("zk", "2"))
	p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: "fd00::3"})
	p.Labels[corev1.LabelTopologyZone] = "zone-b"
	got, ok := PeerOf(slims(t, p)[0], opts)
	want := peer.Peer{
		FQDN: "zk-2.zk.db.svc.cluster.local", Name: "zk-2", IPs: []string{"10.0.0.3", "fd00::3"},
		Ready: true, Serving: true, Pod: "zk-2", UID: "uid-zk-2", Node: "node-0", Zone: "zone-b", Ordinal: 2,
		Ports:  []peer.Port{{Name: "peer", Port: 2888, Protocol: "TCP"}},
		Labels: map[string]string{"app": "web", ordinal.PodIndexLabel: "2", corev1.LabelTopologyZone: "zone-b"},
	}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v\nwant %+v", got, ok, want)
	}
	job := pod("train-worker-3-abcde", "10.0.0.4")
	job.Labels[ordinal.JobCompletionIndexLabel] = "3"
	if got, _ := PeerOf(slims(t, job)[0], opts); got.Ordinal != 3 {
		t.Errorf("job completion index: ordinal %d, want 3", got.Ordinal)
	}
}

// TestCPUMillicores: a peer's CPU request is the sum of its containers'
// requests (1.5 + 250m + none), as -mpi-slots=auto reads it.
func TestCPUMillicores(t *testing.T) {
	p := pod("worker-0", "10.0.0.1")
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1.5"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	p.Spec.Containers = append(p.Spec.Containers,
		corev1.Container{Name: "side", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}},
		corev1.Container{Name: "none"})
	if got, _ := PeerOf(slims(t, p)[0], opts); got.CPUMillicores != 1750 {
		t.Errorf("CPUMillicores = %d, want 1750", got.CPUMillicores)
	}
	if got, _ := PeerOf(slims(t, pod("worker-1", "10.0.0.2"))[0], opts); got.CPUMillicores != 0 {
		t.Errorf("no requests: CPUMillicores = %d, want 0", got.CPUMillicores)
	}
}

func TestSelectorFromLabels(t *testing.T) {
	l := map[string]string{"app": "zk", "role": "server"}
	if got, err := SelectorFromLabels("zk-0", l, []string{"app", "role"}); err != nil || got != "app=zk,role=server" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := SelectorFromLabels("zk-0", l, []string{"tier"}); err == nil {
		t.Error("missing label: no error")
	}
}

func TestNewValidates(t *testing.T) {
	c := clientset.Wrap(fake.NewClientset())
	base := Config{Client: c, Options: opts}
	for name, cfg := range map[string]Config{
		"no selector":       base,
		"both":              {Client: c, Options: opts, Selector: "app=x", SelectorFromSelf: []string{"app"}, SelfPod: "p"},
		"bad selector":      {Client: c, Options: opts, Selector: "app in ("},
		"from self w/o pod": {Client: c, Options: opts, SelectorFromSelf: []string{"app"}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRunSelectorFromSelf(t *testing.T) {
	client := fake.NewClientset(
		pod("web-0", "10.0.0.1"),
		pod("other-0", "10.0.0.9", func(p *corev1.Pod) { p.Labels["app"] = "other" }),
	)
	src, err := New(Config{Client: clientset.Wrap(client), Options: opts, SelectorFromSelf: []string{"app"}, SelfPod: "web-0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	run := sourcetest.Start(t, "pods", src)
	expect := func(want ...string) {
		t.Helper()
		run.Wait(t, await.Timeout, fmt.Sprint(want), func(ps []peer.Peer) bool { return reflect.DeepEqual(keys(ps), want) })
	}
	expect("web-0.web.db.svc.cluster.local=uid-web-0")
	if _, err := client.CoreV1().Pods("db").Create(ctx, pod("web-1", "10.0.0.2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("web-0.web.db.svc.cluster.local=uid-web-0", "web-1.web.db.svc.cluster.local=uid-web-1")
	// Re-created with a new UID and IP.
	if err := client.CoreV1().Pods("db").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("web-0.web.db.svc.cluster.local=uid-web-0")
	if _, err := client.CoreV1().Pods("db").Create(ctx, pod("web-1", "10.0.0.7", uid("uid-web-1b")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("web-0.web.db.svc.cluster.local=uid-web-0", "web-1.web.db.svc.cluster.local=uid-web-1b")
}

func TestRunOwnPodWithoutLabelIsAnError(t *testing.T) {
	client := fake.NewClientset(pod("web-0", "10.0.0.1"))
	src, err := New(Config{Client: clientset.Wrap(client), Options: opts, SelectorFromSelf: []string{"role"}, SelfPod: "web-0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Run(t.Context(), make(chan []peer.Peer)); err == nil {
		t.Error("Run: no error for an own pod without the label")
	}
}

// TestPeersWithoutService: without a governing service (a Deployment or a
// Job), every pod is named by its primary IP, the name Kubernetes DNS gives
// it, subdomain or not.
func TestPeersWithoutService(t *testing.T) {
	noSvc := Options{Namespace: "db", Domain: "cluster.local"}
	dual := pod("api-7d9f-x2b1", "10.0.0.5", func(p *corev1.Pod) {
		p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.5"}, {IP: "fd00::5"}}
	})
	six := pod("api-7d9f-q8z4", "fd00::9", func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "fd00::9"}, {IP: "10.0.0.9"}} })
	indexed := pod("train-0-abcde", "10.0.0.6", sts("train", "0"))
	var got []string
	for _, p := range Peers(slims(t, dual, six, indexed), noSvc) {
		got = append(got, p.FQDN+" "+p.Pod)
	}
	want := []string{"10-0-0-5.db.pod.cluster.local api-7d9f-x2b1", "10-0-0-6.db.pod.cluster.local train-0-abcde", "fd00--9.db.pod.cluster.local api-7d9f-q8z4"}
	if !slices.Equal(got, want) {
		t.Errorf("Peers() = %q, want %q", got, want)
	}
	if _, err := New(Config{Client: clientset.Wrap(fake.NewClientset()), Options: noSvc, Selector: "app=api"}); err != nil {
		t.Errorf("New without a service: %v", err)
	}
}

// TestLabelsAreNotCopied: the transform takes the decoded pod's labels and
// a peer shares its cached pod's (read-only) map, so 1,000 pods cost one
// label map each, not three.
func TestLabelsAreNotCopied(t *testing.T) {
	wire := clientset.SlimPodFrom(pod("web-0", "10.0.0.1"))
	o, err := Slim(wire)
	if err != nil {
		t.Fatal(err)
	}
	cached := o.(*Pod)
	pr, ok := PeerOf(cached, opts)
	if !ok {
		t.Fatal("web-0 is not a peer")
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	if len(pr.Labels) == 0 || !same(cached.Labels, wire.Labels) || !same(pr.Labels, cached.Labels) {
		t.Errorf("labels copied: decoded %p, cached %p, peer %p", wire.Labels, cached.Labels, pr.Labels)
	}
}
