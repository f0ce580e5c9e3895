package clustertest_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/flockd/flock/localcluster"
	"github.com/flockd/flock/localcluster/clustertest"
)

// deadline bounds each wait; generous, since CI machines are slow and shared.
const deadline = 90 * time.Second

// member is what the bed should show for one StatefulSet pod.
type member struct{ name, ip string }

// TestStatefulSetDiscovery checks the path flock discovers peers through: a
// StatefulSet's pods get IPs, EndpointSlices list them with hostnames, and
// CoreDNS answers SRV, A and PTR for them, through scale up, scale down and
// pod replacement.
func TestStatefulSetDiscovery(t *testing.T) {
	t.Parallel()
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	createHeadless(t, c.Client, ns, "web")
	if _, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, statefulSet("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	members := waitMembers(t, c, ns, "web", 3)
	waitDNS(t, c, ns, "web", members)

	scale(t, c, ns, "web", 5)
	members = waitMembers(t, c, ns, "web", 5)
	waitDNS(t, c, ns, "web", members)

	scale(t, c, ns, "web", 2)
	members = waitMembers(t, c, ns, "web", 2)
	waitDNS(t, c, ns, "web", members)

	old := members[1]
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, old.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, "web-1 to come back with a new IP", deadline, func(ctx context.Context) (bool, error) {
		ms, err := readyMembers(ctx, c.Client, ns, "web")
		return err == nil && len(ms) == 2 && ms[1].ip != "" && ms[1].ip != old.ip, err
	})
	members = waitMembers(t, c, ns, "web", 2)
	waitDNS(t, c, ns, "web", members)
}

// TestPodControls checks the test.flockd.io annotations: not-ready, ready
// again, and failure (which the StatefulSet controller answers with a new pod).
func TestPodControls(t *testing.T) {
	t.Parallel()
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	createHeadless(t, c.Client, ns, "db")
	if _, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, statefulSet("db", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, c, ns, "db", 1)
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	c.SetPodReady(t, ns, "db-0", false)
	waitPod(t, c, ns, "db-0", "not ready", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && !clustertest.PodReady(p) })
	waitEndpoint(t, c, ns, "db", "db-0 not ready in the EndpointSlice", func(ep discoveryv1.Endpoint) bool {
		return ep.Conditions.Ready != nil && !*ep.Conditions.Ready
	})

	c.SetPodReady(t, ns, "db-0", true)
	waitPod(t, c, ns, "db-0", "ready again", clustertest.PodReady)

	c.FailPod(t, ns, "db-0")
	waitPod(t, c, ns, "db-0", "replaced after failure", func(p *corev1.Pod) bool { return p.UID != pod.UID && clustertest.PodReady(p) })
}

// TestGracefulDeletion checks that a pod annotated with terminate-after stays
// terminating that long, listed as terminating in its EndpointSlice, before a
// replacement comes.
func TestGracefulDeletion(t *testing.T) {
	t.Parallel()
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	createHeadless(t, c.Client, ns, "slow")
	sts := statefulSet("slow", 1)
	sts.Spec.Template.Annotations = map[string]string{clustertest.AnnotationTerminateAfter: "3s"}
	sts.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	if _, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := waitMembers(t, c, ns, "slow", 1)[0]
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, old.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, old.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEndpoint(t, c, ns, "slow", "slow-0 terminating in the EndpointSlice", func(ep discoveryv1.Endpoint) bool {
		return ep.Conditions.Terminating != nil && *ep.Conditions.Terminating && len(ep.Addresses) > 0 && ep.Addresses[0] == old.ip
	})
	waitPod(t, c, ns, old.name, "replaced", func(p *corev1.Pod) bool { return p.UID != pod.UID && clustertest.PodReady(p) })
}

// TestNodes checks the simulated nodes: ready, zoned, with a pod CIDR. Other
// tests may add nodes of their own; only the bed's are checked.
func TestNodes(t *testing.T) {
	t.Parallel()
	c := clustertest.Get(t)
	if len(c.Nodes) < 2 {
		t.Fatalf("nodes %v, want at least 2", c.Nodes)
	}
	zones := map[string]bool{}
	for _, name := range c.Nodes {
		n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		zones[n.Labels["topology.kubernetes.io/zone"]] = true
		if n.Labels["kubernetes.io/hostname"] != n.Name {
			t.Errorf("node %s: hostname label %q", n.Name, n.Labels["kubernetes.io/hostname"])
		}
		if n.Spec.PodCIDR == "" {
			t.Errorf("node %s has no pod CIDR", n.Name)
		}
		if !nodeReady(n) {
			t.Errorf("node %s is not ready: %v", n.Name, n.Status.Conditions)
		}
	}
	if len(zones) < 2 || zones[""] {
		t.Errorf("zones %v, want at least two, all named", zones)
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestServiceAccountConfig checks that the limited config gets exactly its rules.
func TestServiceAccountConfig(t *testing.T) {
	t.Parallel()
	c := clustertest.Get(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	cfg := c.ServiceAccountConfig(t, ns, rbacv1.PolicyRule{
		APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"},
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// RBAC changes reach the authorizer's cache asynchronously.
	c.WaitFor(t, "endpointslice list allowed", deadline, func(ctx context.Context) (bool, error) {
		_, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
	if _, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing pods: got %v, want forbidden", err)
	}
}

func createHeadless(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{"app": name},
			Ports:     []corev1.ServicePort{{Name: "peer", Port: 7000}},
		},
	}
	if _, err := cs.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func statefulSet(name string, replicas int32) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			ServiceName:         name,
			Replicas:            ptr.To(replicas),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1", Ports: []corev1.ContainerPort{{Name: "peer", ContainerPort: 7000}}}},
					// A real kubelet would wait this long; the simulation need not.
					TerminationGracePeriodSeconds: ptr.To[int64](5),
				},
			},
		},
	}
}

func scale(t *testing.T, c *clustertest.Cluster, ns, name string, n int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := c.Client.AppsV1().StatefulSets(ns).Patch(context.Background(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale %s to %d: %v", name, n, err)
	}
}

// readyMembers lists the StatefulSet's pods that exist and are not
// terminating, by ordinal; ip is empty for pods that are not ready.
func readyMembers(ctx context.Context, cs kubernetes.Interface, ns, name string) ([]member, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return nil, err
	}
	var ms []member
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		m := member{name: p.Name}
		if clustertest.PodReady(&p) {
			m.ip = p.Status.PodIP
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.name, b.name) })
	return ms, nil
}

// waitMembers waits until exactly name-0..n-1 are ready with pod-CIDR IPs and
// the EndpointSlices list each with its hostname and IP, and nothing else.
func waitMembers(t *testing.T, c *clustertest.Cluster, ns, name string, n int) []member {
	t.Helper()
	_, podNet, _ := net.ParseCIDR(localcluster.PodCIDR)
	var ms []member
	c.WaitFor(t, fmt.Sprintf("%d ready members of %s in pods and EndpointSlices", n, name), deadline, func(ctx context.Context) (bool, error) {
		var err error
		if ms, err = readyMembers(ctx, c.Client, ns, name); err != nil || len(ms) != n {
			return false, err
		}
		want := map[string]string{}
		for i, m := range ms {
			if m.name != fmt.Sprintf("%s-%d", name, i) || m.ip == "" {
				return false, nil
			}
			if ip := net.ParseIP(m.ip); ip == nil || ip.IsLoopback() || !podNet.Contains(ip) {
				return false, fmt.Errorf("%s has IP %q outside %s", m.name, m.ip, localcluster.PodCIDR)
			}
			want[m.name] = m.ip
		}
		got, err := endpoints(ctx, c.Client, ns, name)
		if err != nil {
			return false, err
		}
		if len(got) != len(want) {
			return false, fmt.Errorf("EndpointSlices list %v, want %v", got, want)
		}
		for h, ip := range want {
			if got[h] != ip {
				return false, fmt.Errorf("EndpointSlices list %v, want %v", got, want)
			}
		}
		return true, nil
	})
	return ms
}

// endpoints maps hostname to address of the service's ready endpoints.
func endpoints(ctx context.Context, cs kubernetes.Interface, ns, svc string) (map[string]string, error) {
	slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.Hostname == nil || len(ep.Addresses) == 0 || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
				continue
			}
			out[*ep.Hostname] = ep.Addresses[0]
		}
	}
	return out, nil
}

// waitDNS waits until CoreDNS's SRV answer for the service names exactly the
// members, and each member's A and PTR records match.
func waitDNS(t *testing.T, c *clustertest.Cluster, ns, svc string, ms []member) {
	t.Helper()
	fqdn := fmt.Sprintf("%s.%s.svc.%s.", svc, ns, c.Domain)
	c.WaitFor(t, fmt.Sprintf("CoreDNS records of %d members of %s", len(ms), svc), deadline, func(ctx context.Context) (bool, error) {
		var want []string
		for _, m := range ms {
			want = append(want, m.name+"."+fqdn)
		}
		r, err := query(ctx, c.DNSAddr, fqdn, dns.TypeSRV)
		if err != nil {
			return false, err
		}
		var got []string
		for _, rr := range r.Answer {
			if srv, ok := rr.(*dns.SRV); ok {
				got = append(got, srv.Target)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return false, fmt.Errorf("SRV %s = %v, want %v", fqdn, got, want)
		}
		for _, m := range ms {
			name := m.name + "." + fqdn
			r, err := query(ctx, c.DNSAddr, name, dns.TypeA)
			if err != nil {
				return false, err
			}
			if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != m.ip {
				return false, fmt.Errorf("A %s = %v, want %s", name, r.Answer, m.ip)
			}
			rev, err := dns.ReverseAddr(m.ip)
			if err != nil {
				return false, err
			}
			r, err = query(ctx, c.DNSAddr, rev, dns.TypePTR)
			if err != nil {
				return false, err
			}
			if len(r.Answer) != 1 || r.Answer[0].(*dns.PTR).Ptr != name {
				return false, fmt.Errorf("PTR %s = %v, want %s", rev, r.Answer, name)
			}
		}
		return true, nil
	})
}

func query(ctx context.Context, server, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(4096, false)
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).ExchangeContext(ctx, m, server)
	if err != nil {
		return nil, fmt.Errorf("query %s %s: %w", dns.TypeToString[qtype], name, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("query %s %s: %s", dns.TypeToString[qtype], name, dns.RcodeToString[r.Rcode])
	}
	return r, nil
}

func waitPod(t *testing.T, c *clustertest.Cluster, ns, name, what string, cond func(*corev1.Pod) bool) {
	t.Helper()
	c.WaitFor(t, name+" "+what, deadline, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && cond(p), err
	})
}

func waitEndpoint(t *testing.T, c *clustertest.Cluster, ns, svc, what string, cond func(discoveryv1.Endpoint) bool) {
	t.Helper()
	c.WaitFor(t, what, deadline, func(ctx context.Context) (bool, error) {
		sl, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			return false, err
		}
		for _, s := range sl.Items {
			for _, ep := range s.Endpoints {
				if cond(ep) {
					return true, nil
				}
			}
		}
		return false, nil
	})
}

// TestPrivateRestartAPIServer checks that a private cluster survives an API
// server restart with its data and keeps working.
func TestPrivateRestartAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of its own")
	}
	t.Parallel()
	c := clustertest.Private(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	createHeadless(t, c.Client, ns, "web")
	c.RestartAPIServer(t)
	if _, err := c.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("service after restart: %v", err)
	}
	if _, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, statefulSet("web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, c, ns, "web", 2)
}
