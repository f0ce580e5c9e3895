package localcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// poll calls check every interval until it returns nil, a started process
// dies, or ctx ends; the error then says what was awaited and the last failure.
func poll(ctx context.Context, s *State, what string, check func(context.Context) error) error {
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if err := s.deadProc(); err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w (last error: %w)", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// insecureHTTP reaches the components' own self-signed health endpoints.
var insecureHTTP = &http.Client{
	Timeout:   2 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback health probe
}

func waitHTTP(ctx context.Context, s *State, what, url string, insecure bool) error {
	c := http.DefaultClient
	if insecure {
		c = insecureHTTP
	}
	return poll(ctx, s, what, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
		}
		return nil
	})
}

func waitAPI(ctx context.Context, s *State, cs kubernetes.Interface) error {
	return poll(ctx, s, "kube-apiserver /readyz", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// bootstrap creates what the components expect to exist: CoreDNS's read
// access and the simulated nodes.
func bootstrap(ctx context.Context, cs kubernetes.Interface, o Options) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "flock:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "flock:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "flock-coredns"}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CoreDNS role: %w", err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind CoreDNS role: %w", err)
	}
	for i := range o.Nodes {
		if _, err := cs.CoreV1().Nodes().Create(ctx, node(i, o.Nodes, o.Zones), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %d: %w", i, err)
		}
	}
	return nil
}

// node is simulated node i of n: an equal share of PodCIDR, zone round robin,
// and the capacity of a modest real machine so scheduling constraints mean
// something.
func node(i, n, zones int) *corev1.Node {
	name := nodeName(i)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	cidr := nodeCIDR(i, n)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname":        name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/arch":            "amd64",
				"topology.kubernetes.io/region": "local",
				"topology.kubernetes.io/zone":   fmt.Sprintf("zone-%c", 'a'+i%zones),
				"type":                          "kwok",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.243.0.%d", i+1)},
				{Type: corev1.NodeHostName, Address: name},
			},
		},
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// NodeNames are the names of the cluster's simulated nodes.
func (s *State) NodeNames() []string {
	names := make([]string, s.Nodes)
	for i := range names {
		names[i] = nodeName(i)
	}
	return names
}

// nodeCIDR splits PodCIDR (a /16) into the smallest power of two of equal
// blocks that holds n nodes, at least a /24 each, and returns block i. Pod IPs
// are not reused (see kwok.yaml.tmpl), so big blocks last long.
func nodeCIDR(i, n int) string {
	bits := 0
	for 1<<bits < n {
		bits++
	}
	bits = min(bits, 8)
	size := 1 << (16 - bits) // addresses per block
	start := i * size
	return fmt.Sprintf("10.244.%d.%d/%d", start>>8&0xff, start&0xff, 16+bits)
}

// waitNodes waits until n nodes are Ready and free of the not-ready taint the
// node-lifecycle controller puts on new nodes.
func waitNodes(ctx context.Context, s *State, cs kubernetes.Interface, n int) error {
	return poll(ctx, s, fmt.Sprintf("%d ready nodes", n), func(ctx context.Context) error {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, nd := range nodes.Items {
			if nodeReady(&nd) {
				ready++
			}
		}
		if ready < n {
			return fmt.Errorf("%d of %d nodes ready and untainted", ready, n)
		}
		return nil
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitServiceAccount waits for the default ServiceAccount of ns, without which
// pods cannot be created there.
func waitServiceAccount(ctx context.Context, s *State, cs kubernetes.Interface, ns string) error {
	return poll(ctx, s, "default ServiceAccount in "+ns, func(ctx context.Context) error {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// waitDNS waits until CoreDNS answers the kubernetes Service's A record.
func waitDNS(ctx context.Context, s *State) error {
	name := "kubernetes.default.svc." + s.Domain + "."
	return poll(ctx, s, "CoreDNS answer for "+name, func(ctx context.Context) error {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		c := &dns.Client{Timeout: time.Second}
		r, _, err := c.ExchangeContext(ctx, m, s.DNSAddr)
		if err != nil {
			return err
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			return fmt.Errorf("%s: %s with %d answers", name, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		return nil
	})
}
