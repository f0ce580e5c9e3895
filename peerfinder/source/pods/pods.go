// Package pods discovers peers by watching pods with a label selector, the
// approach of discovering a Deployment's peers by its app label, done with a
// server-side selector, a watch instead of polling, and no aliasing.
//
// The selector is given (Config.Selector) or built from the own pod's labels
// (Config.SelectorFromSelf: the values of those keys on the pod named
// Config.SelfPod, read once at start with a get).
//
// # From pods to peers
//
// A pod is a peer when it is Running, not terminating (no deletionTimestamp)
// and has an IP; a not-ready pod (Ready condition not True) only with
// IncludeNotReady, which also admits Pending pods that have an IP: pods
// whose init containers run (their sandbox and IP exist), as the
// EndpointSlice controller lists them with publishNotReadyAddresses. Without
// that, the init containers of a batch job's pods, each waiting for the
// others' addresses, would wait for each other forever. Peers are keyed by name, never by IP, so a reused IP can
// never make one pod look like another:
//   - spec.hostname and spec.subdomain set (StatefulSet pods):
//     <hostname>.<subdomain>.<ns>.svc.<domain>, the name the pod has in DNS;
//   - else <hostname or pod name>.<service>.<ns>.svc.<domain>, which equals
//     peer-finder's self name (a pod's host name is its name) so the self
//     gate works for Deployment pods; it resolves in DNS only through
//     CoreDNS's endpoint_pod_names on a headless service, the IPs field
//     carries the addresses.
//
// If two live pods claim one name (a Deployment with a fixed spec.hostname),
// the ready one wins, then the newer one, then the smaller UID.
//
// Fields: IPs from status.podIPs (all families), Ready from the Ready
// condition, Pod and UID, Node from spec.nodeName, Labels the pod's labels,
// Ports the containers' ports, Ordinal by ordinal.Of (the pod-index or Job
// completion index label, else the name of a StatefulSet's pod). Zone comes
// from a topology.kubernetes.io/zone label on the pod when there is one and
// is empty otherwise: reading it from the node would need a get on nodes
// (a ClusterRole) per pod; the endpointslice source has the zone for free.
package pods

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/internal/retry"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/source"
	"github.com/flockd/flock/peerfinder/source/kubesource"
)

// Options say how pods become peers.
type Options struct {
	// Service, Namespace and Domain make the FQDNs of pods without a
	// subdomain. Without a Service every pod is named by its primary IP
	// (peer.PodFQDN: 10-1-2-3.<ns>.pod.<domain>), subdomain or not.
	Service, Namespace, Domain string
	// IncludeNotReady keeps running pods whose Ready condition is not True.
	IncludeNotReady bool
}

// Config configures a Source. Client, Namespace, Domain and one of
// Selector or SelectorFromSelf (with SelfPod) are required.
type Config struct {
	Client *kube.Client
	Options
	// Selector is a label selector, e.g. "app=zk,tier in (db)".
	Selector string
	// SelectorFromSelf lists label keys; the selector becomes
	// key=<value on the own pod> for each.
	SelectorFromSelf []string
	// SelfPod is the own pod's name, for SelectorFromSelf.
	SelfPod string
	// Logger receives one line per change of the API requests' health.
	Logger *slog.Logger
	// Metrics, when not nil, counts list, watch and get failures and relists.
	Metrics *kube.Metrics
	// OnForbidden, when not nil, is told when RBAC forbids the source's
	// requests (kube.Reporter.OnForbidden): peer-finder's Forbidden Event.
	OnForbidden func(kube.Forbidden)
	// RetryMin and RetryMax bound the backoff of reading the own pod
	// (defaults 1s and 30s).
	RetryMin, RetryMax time.Duration
}

// Source is the pods source. It implements source.Source and source.Lookuper.
type Source struct {
	cfg      Config
	log      *slog.Logger
	reporter *kube.Reporter
	target   kube.Target
}

var (
	_ source.Source   = (*Source)(nil)
	_ source.Lookuper = (*Source)(nil)
)

// Verbs returns the RBAC verbs the source needs on pods.
func (c Config) Verbs() []string {
	if len(c.SelectorFromSelf) > 0 {
		return []string{"get", "list", "watch"}
	}
	return []string{"list", "watch"}
}

// New validates cfg and returns a Source.
func New(cfg Config) (*Source, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("pods source: no client")
	case cfg.Namespace == "" || cfg.Domain == "":
		return nil, errors.New("pods source: namespace and domain are required")
	case cfg.Selector != "" && len(cfg.SelectorFromSelf) > 0:
		return nil, errors.New("pods source: set a selector or the label keys of the own pod, not both")
	case cfg.Selector == "" && len(cfg.SelectorFromSelf) == 0:
		return nil, errors.New("pods source: a label selector is required")
	case len(cfg.SelectorFromSelf) > 0 && cfg.SelfPod == "":
		return nil, errors.New("pods source: the own pod's name is required to build the selector from its labels")
	}
	if cfg.Selector != "" {
		sel, err := labels.Parse(cfg.Selector)
		if err != nil {
			return nil, fmt.Errorf("pods source: selector %q: %w", cfg.Selector, err)
		}
		if sel.Empty() {
			return nil, fmt.Errorf("pods source: selector %q selects every pod", cfg.Selector)
		}
	}
	cfg.RetryMin = cmp.Or(cfg.RetryMin, time.Second)
	cfg.RetryMax = max(cmp.Or(cfg.RetryMax, 30*time.Second), cfg.RetryMin)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	target := kube.Target{Resource: "pods", Namespace: cfg.Namespace, Verbs: cfg.Verbs()}
	return &Source{cfg: cfg, log: log, target: target, reporter: kube.NewReporter(target, log).WithMetrics(cfg.Metrics).OnForbidden(cfg.OnForbidden)}, nil
}

// SelectorFromLabels builds key=value terms for keys from a pod's labels.
// It is pure.
func SelectorFromLabels(pod string, podLabels map[string]string, keys []string) (string, error) {
	terms := make([]string, 0, len(keys))
	for _, k := range keys {
		v, ok := podLabels[k]
		if !ok {
			return "", fmt.Errorf("own pod %s has no label %q to select its peers by", pod, k)
		}
		terms = append(terms, k+"="+v)
	}
	return strings.Join(terms, ","), nil
}

// selector returns the label selector, reading the own pod if needed.
// With keepTrying it retries failures with backoff (kube.OwnPod) until ctx
// ends, then returns "" and nil.
func (s *Source) selector(ctx context.Context, keepTrying bool) (string, error) {
	if s.cfg.Selector != "" {
		return s.cfg.Selector, nil
	}
	pods := s.cfg.Client.Pods(s.cfg.Namespace)
	var pod *corev1.Pod
	var err error
	if keepTrying {
		pod, err = kube.OwnPod(ctx, pods, s.cfg.SelfPod, s.backoff(), func(err error, _ time.Duration) {
			s.reporter.Failed(ctx, "get", err)
		})
		if err != nil {
			return "", nil // ctx ended
		}
	} else if pod, err = pods.Get(ctx, s.cfg.SelfPod, metav1.GetOptions{}); err != nil {
		return "", fmt.Errorf("read own pod: %s", s.target.Describe(err, "get"))
	}
	s.reporter.Succeeded()
	sel, err := SelectorFromLabels(s.cfg.SelfPod, pod.Labels, s.cfg.SelectorFromSelf)
	if err == nil {
		s.log.Info("selecting peers by the own pod's labels", "pod", s.cfg.SelfPod, "selector", sel)
	}
	return sel, err
}

func (s *Source) backoff() retry.Backoff {
	return retry.Backoff{Min: s.cfg.RetryMin, Max: s.cfg.RetryMax}
}

func (s *Source) informer(selector string) kubesource.Informer {
	lw := kube.SelectedListWatch(s.cfg.Client.SlimPods(s.cfg.Namespace), selector, "")
	opts := s.cfg.Options
	return kubesource.Informer{
		ListerWatcher: s.reporter.ListerWatcher(lw, s.cfg.Client),
		ObjectType:    &kube.SlimPod{},
		Transform:     Slim,
		Peers: func(objs []any) []peer.Peer {
			ps := make([]*Pod, 0, len(objs))
			for _, o := range objs {
				if p, ok := o.(*Pod); ok {
					ps = append(ps, p)
				}
			}
			return Peers(ps, opts)
		},
		Logger: s.log,
	}
}

// Run implements source.Source: see kubesource.Informer.Run. A selector built
// from the own pod's labels is resolved first; reading the own pod is
// retried with backoff, and an own pod without the labels is an error.
func (s *Source) Run(ctx context.Context, up chan<- []peer.Peer) error {
	sel, err := s.selector(ctx, true)
	if err != nil {
		return fmt.Errorf("pods source: %w", err)
	}
	if ctx.Err() != nil {
		return nil
	}
	return s.informer(sel).Run(ctx, up)
}

// Lookup implements source.Lookuper with one get (for SelectorFromSelf)
// and one list.
func (s *Source) Lookup(ctx context.Context) ([]peer.Peer, error) {
	sel, err := s.selector(ctx, false)
	if err != nil {
		return nil, err
	}
	ps, err := s.informer(sel).Lookup(ctx)
	if err != nil {
		return nil, errors.New(s.target.Describe(err, "list"))
	}
	return ps, nil
}

// Pod is the slim form of a pod kept in the informer's cache. ObjectMeta
// holds only Name, Namespace, UID, ResourceVersion, Labels,
// CreationTimestamp and DeletionTimestamp.
type Pod struct {
	metav1.ObjectMeta
	Hostname, Subdomain, Node string
	// StatefulSet names the pod's controlling StatefulSet, "" for none.
	StatefulSet string
	Phase       corev1.PodPhase
	IPs         []string
	Ready       bool
	Ports       []peer.Port
	// CPUMillicores is the sum of the containers' CPU requests.
	CPUMillicores int64
}

// Slim is the informer's transform: *kube.SlimPod (what the client
// decodes) -> *Pod. A *Pod passes through unchanged.
func Slim(obj any) (any, error) {
	switch o := obj.(type) {
	case *Pod:
		return o, nil
	case *kube.SlimPod:
		return slim(o), nil
	}
	return nil, fmt.Errorf("pods transform: unexpected %T", obj)
}

func slim(p *kube.SlimPod) *Pod {
	s := &Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			// The decoded SlimPod is dropped after this transform: its
			// labels are taken, not copied.
			Labels: p.Labels, CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
		},
		Hostname: p.Spec.Hostname, Subdomain: p.Spec.Subdomain, Node: p.Spec.NodeName,
		StatefulSet: kube.StatefulSetOf(&p.ObjectMeta), Phase: corev1.PodPhase(p.Status.Phase),
	}
	for _, ip := range p.Status.PodIPs {
		s.IPs = append(s.IPs, ip.IP)
	}
	if len(s.IPs) == 0 && p.Status.PodIP != "" {
		s.IPs = []string{p.Status.PodIP}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == string(corev1.PodReady) {
			s.Ready = c.Status == string(corev1.ConditionTrue)
		}
	}
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			s.Ports = append(s.Ports, peer.Port{Name: port.Name, Port: port.ContainerPort, Protocol: port.Protocol})
		}
		s.CPUMillicores += cpuMillicores(c.Resources.Requests[string(corev1.ResourceCPU)])
	}
	return s
}

// cpuMillicores is a CPU quantity in millicores, rounded up as Kubernetes
// rounds a request; 0 for none or one that does not parse.
func cpuMillicores(q string) int64 {
	if q == "" {
		return 0
	}
	v, err := resource.ParseQuantity(q)
	if err != nil {
		return 0
	}
	return max(v.MilliValue(), 0)
}

// PeerOf converts one pod; ok is false when the pod is not a peer. Pure.
func PeerOf(p *Pod, o Options) (_ peer.Peer, ok bool) {
	live := p.Phase == corev1.PodRunning || p.Phase == corev1.PodPending && o.IncludeNotReady
	if !live || p.DeletionTimestamp != nil || len(p.IPs) == 0 || (!p.Ready && !o.IncludeNotReady) {
		return peer.Peer{}, false
	}
	name := strings.ToLower(cmp.Or(p.Hostname, p.Name))
	sub := o.Service
	if p.Hostname != "" && p.Subdomain != "" {
		sub = p.Subdomain
	}
	fqdn := peer.FQDN(name, sub, o.Namespace, o.Domain)
	if o.Service == "" {
		fqdn = peer.PodFQDN(p.IPs[0], o.Namespace, o.Domain) // the primary IP (status.podIP)
	}
	pr := peer.Peer{
		FQDN:    fqdn,
		Name:    name,
		IPs:     slices.Sorted(slices.Values(p.IPs)),
		Ready:   p.Ready,
		Serving: p.Ready,
		Pod:     p.Name,
		UID:     string(p.UID),
		Node:    p.Node,
		Zone:    p.Labels[corev1.LabelTopologyZone],
		Ordinal: ordinal.Of(p.Name, p.Labels, p.StatefulSet),
		// Shared with the cached pod: labels are read-only everywhere
		// (peer.NewSet's merge copies before it writes), so 1,000 peers
		// cost no second 1,000 maps, nor 1,000 more garbage ones per change.
		Labels:        p.Labels,
		CPUMillicores: p.CPUMillicores,
	}
	if len(p.Ports) > 0 {
		pr.Ports = slices.Clone(p.Ports)
		slices.SortFunc(pr.Ports, peer.ComparePorts)
		pr.Ports = slices.Compact(pr.Ports)
	}
	return pr, true
}

// Peers converts the pods into peers sorted by FQDN, one per name (see the
// package documentation for conflicts). Pure.
func Peers(pods []*Pod, o Options) []peer.Peer {
	type cand struct {
		p       peer.Peer
		created time.Time
	}
	byKey := make(map[string]cand, len(pods))
	for _, pod := range pods {
		p, ok := PeerOf(pod, o)
		if !ok {
			continue
		}
		c := cand{p, pod.CreationTimestamp.Time}
		old, dup := byKey[p.FQDN]
		if !dup || better(c.p, c.created, old.p, old.created) {
			byKey[p.FQDN] = c
		}
	}
	out := make([]peer.Peer, 0, len(byKey))
	for _, c := range byKey {
		out = append(out, c.p)
	}
	slices.SortFunc(out, func(a, b peer.Peer) int { return strings.Compare(a.FQDN, b.FQDN) })
	return out
}

func better(a peer.Peer, ac time.Time, b peer.Peer, bc time.Time) bool {
	switch {
	case a.Ready != b.Ready:
		return a.Ready
	case !ac.Equal(bc):
		return ac.After(bc)
	}
	return a.UID < b.UID
}
