// Package endpointslice discovers peers by watching the EndpointSlices of
// the governing Service. It is event-driven: a pod becoming ready reaches
// the engine in milliseconds, with no DNS cache in between.
//
// The watch is namespace-scoped with the server-side label selector
// kubernetes.io/service-name=<service>, so only that service's slices are
// sent and cached, and only in a slim form (Slice): no managed fields,
// labels, annotations or unused endpoint fields are kept.
//
// # From endpoints to peers
//
// Each endpoint becomes one peer, keyed by its FQDN:
//   - with a hostname (StatefulSet pods whose subdomain is the service):
//     <hostname>.<service>.<ns>.svc.<domain>, the name CoreDNS serves;
//   - else with a targetRef to a pod (Deployment pods, or a StatefulSet whose
//     serviceName is another service): <pod-name>.<service>.<ns>.svc.<domain>.
//     This is stable across IP changes and equals peer-finder's self name
//     (the OS host name of a pod is its name), so the self gate works. It
//     resolves in DNS only with CoreDNS's endpoint_pod_names option; the
//     peer's IPs carry the addresses;
//   - else (a hand-made slice): the first address with dashes, as CoreDNS
//     names such endpoints (10-1-2-3.<service>.<ns>.svc.<domain>).
//
// Endpoints with the same key in several slices (one slice per address
// family) are merged: all IPs and ports of every family. If two different
// pods claim one key, the ready one wins, then the one with the smaller UID,
// so the choice is deterministic.
//
// Conditions are read as the API defines them: ready and serving unset mean
// true, terminating unset means false. A terminating endpoint always leaves
// the set, even when it still says ready=true (a service with
// publishNotReadyAddresses reports ready=true for every endpoint). A
// not-ready endpoint is included only with IncludeNotReady; this works
// without publishNotReadyAddresses because EndpointSlices list not-ready
// endpoints too, with ready=false.
//
// Ordinal comes from the hostname or pod name by ordinal.FromName (-1
// for names made from an address). Node and Zone come from the endpoint, Pod and UID from its
// targetRef, Ports from the slice.
package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flockd/flock/internal/kube"
	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/source"
	"github.com/flockd/flock/peerfinder/source/kubesource"
)

// Verbs are the RBAC verbs the source needs on endpointslices.discovery.k8s.io
// in the service's namespace.
var Verbs = []string{"list", "watch"}

// Options say how endpoints become peers.
type Options struct {
	// Service, Namespace and Domain make the FQDNs.
	Service, Namespace, Domain string
	// IncludeNotReady keeps endpoints whose ready condition is false (but
	// never terminating ones).
	IncludeNotReady bool
}

// Config configures a Source. Client, Service, Namespace and Domain are required.
type Config struct {
	Client *kube.Client
	Options
	// Logger receives one line per change of the watch's health; nil discards.
	Logger *slog.Logger
	// Metrics, when not nil, counts list and watch failures and relists.
	Metrics *kube.Metrics
	// OnForbidden, when not nil, is told when RBAC forbids the source's
	// requests (kube.Reporter.OnForbidden): peer-finder's Forbidden Event.
	OnForbidden func(kube.Forbidden)
}

// Source is the EndpointSlice source. It implements source.Source and
// source.Lookuper.
type Source struct {
	informer kubesource.Informer
	target   kube.Target
}

var (
	_ source.Source   = (*Source)(nil)
	_ source.Lookuper = (*Source)(nil)
)

// New validates cfg and returns a Source.
func New(cfg Config) (*Source, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("endpointslice source: no client")
	case cfg.Service == "" || cfg.Namespace == "" || cfg.Domain == "":
		return nil, errors.New("endpointslice source: service, namespace and domain are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	target := kube.Target{Resource: "endpointslices.discovery.k8s.io", Namespace: cfg.Namespace, Verbs: Verbs}
	selector := discoveryv1.LabelServiceName + "=" + cfg.Service
	lw := kube.SelectedListWatch(cfg.Client.EndpointSlices(cfg.Namespace), selector, "")
	opts := cfg.Options
	return &Source{
		target: target,
		informer: kubesource.Informer{
			ListerWatcher: kube.NewReporter(target, log).WithMetrics(cfg.Metrics).OnForbidden(cfg.OnForbidden).ListerWatcher(lw, cfg.Client),
			ObjectType:    &discoveryv1.EndpointSlice{},
			Transform:     Slim,
			Peers: func(objs []any) []peer.Peer {
				ss := make([]*Slice, 0, len(objs))
				for _, o := range objs {
					if s, ok := o.(*Slice); ok {
						ss = append(ss, s)
					}
				}
				return Peers(ss, opts)
			},
			Logger: log,
		},
	}, nil
}

// Run implements source.Source: see kubesource.Informer.Run.
func (s *Source) Run(ctx context.Context, up chan<- []peer.Peer) error {
	return s.informer.Run(ctx, up)
}

// Lookup implements source.Lookuper with one list call.
func (s *Source) Lookup(ctx context.Context) ([]peer.Peer, error) {
	ps, err := s.informer.Lookup(ctx)
	if err != nil {
		return nil, errors.New(s.target.Describe(err, "list"))
	}
	return ps, nil
}

// Slice is the slim form of an EndpointSlice kept in the informer's cache.
// ObjectMeta holds only Name, Namespace and ResourceVersion.
type Slice struct {
	metav1.ObjectMeta
	Ports     []peer.Port
	Endpoints []Endpoint
}

// Endpoint is the slim form of one endpoint, conditions resolved.
type Endpoint struct {
	Addresses                   []string
	Hostname                    string
	Ready, Serving, Terminating bool
	Node, Zone                  string
	// Pod and UID come from a targetRef of kind Pod.
	Pod, UID string
}

// Slim is the informer's transform: *discoveryv1.EndpointSlice -> *Slice.
// A *Slice passes through unchanged.
func Slim(obj any) (any, error) {
	switch o := obj.(type) {
	case *Slice:
		return o, nil
	case *discoveryv1.EndpointSlice:
		return slim(o), nil
	}
	return nil, fmt.Errorf("endpointslice transform: unexpected %T", obj)
}

func slim(es *discoveryv1.EndpointSlice) *Slice {
	s := &Slice{ObjectMeta: metav1.ObjectMeta{Name: es.Name, Namespace: es.Namespace, ResourceVersion: es.ResourceVersion}}
	for _, p := range es.Ports {
		port := peer.Port{Name: deref(p.Name, ""), Port: deref(p.Port, 0)}
		if p.Protocol != nil {
			port.Protocol = string(*p.Protocol)
		}
		s.Ports = append(s.Ports, port)
	}
	s.Endpoints = make([]Endpoint, 0, len(es.Endpoints))
	for _, e := range es.Endpoints {
		ready := deref(e.Conditions.Ready, true)
		ep := Endpoint{
			Addresses:   slices.Clone(e.Addresses),
			Hostname:    deref(e.Hostname, ""),
			Ready:       ready,
			Serving:     deref(e.Conditions.Serving, ready),
			Terminating: deref(e.Conditions.Terminating, false),
			Node:        deref(e.NodeName, ""),
			Zone:        deref(e.Zone, ""),
		}
		if r := e.TargetRef; r != nil && (r.Kind == "Pod" || r.Kind == "") && r.Name != "" {
			ep.Pod, ep.UID = r.Name, string(r.UID)
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// Peers converts the slices of one service into peers, sorted by FQDN. It is
// pure; the package documentation describes the rules.
func Peers(ss []*Slice, o Options) []peer.Peer {
	ss = slices.Clone(ss)
	slices.SortFunc(ss, func(a, b *Slice) int { return strings.Compare(a.Name, b.Name) })
	suffix := "." + peer.FQDN("", o.Service, o.Namespace, o.Domain)
	byKey := make(map[string]*peer.Peer)
	for _, s := range ss {
		for _, e := range s.Endpoints {
			if e.Terminating || (!e.Ready && !o.IncludeNotReady) || len(e.Addresses) == 0 {
				continue
			}
			name, ordinal := endpointName(e)
			p := peer.Peer{
				FQDN: name + suffix, Name: name, IPs: slices.Clone(e.Addresses),
				Ready: e.Ready, Serving: e.Serving,
				Pod: e.Pod, UID: e.UID, Node: e.Node, Zone: e.Zone,
				Ordinal: ordinal, Ports: slices.Clone(s.Ports),
			}
			old, ok := byKey[p.FQDN]
			switch {
			case !ok:
				byKey[p.FQDN] = &p
			case old.UID == p.UID:
				old.IPs = append(old.IPs, p.IPs...)
				old.Ports = append(old.Ports, p.Ports...)
				old.Ready = old.Ready || p.Ready
				old.Serving = old.Serving || p.Serving
			case better(p, *old):
				byKey[p.FQDN] = &p
			}
		}
	}
	out := make([]peer.Peer, 0, len(byKey))
	for _, p := range byKey {
		p.IPs = sortedUnique(p.IPs, strings.Compare)
		p.Ports = sortedUnique(p.Ports, peer.ComparePorts)
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b peer.Peer) int { return strings.Compare(a.FQDN, b.FQDN) })
	return out
}

// better decides between two different pods claiming one name.
func better(a, b peer.Peer) bool {
	if a.Ready != b.Ready {
		return a.Ready
	}
	return a.UID < b.UID
}

// endpointName is the first label of an endpoint's FQDN and its ordinal.
func endpointName(e Endpoint) (string, int) {
	switch {
	case e.Hostname != "":
		h := strings.ToLower(e.Hostname)
		return h, ordinal.FromName(h)
	case e.Pod != "" && !strings.Contains(e.Pod, "."):
		p := strings.ToLower(e.Pod)
		return p, ordinal.FromName(p)
	}
	return strings.NewReplacer(".", "-", ":", "-").Replace(e.Addresses[0]), -1
}

func sortedUnique[T comparable](s []T, cmp func(a, b T) int) []T {
	if len(s) == 0 {
		return nil
	}
	slices.SortFunc(s, cmp)
	return slices.Compact(s)
}
