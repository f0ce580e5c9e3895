// Package peer defines the value types that flow through flock's pipeline:
// a Peer, an immutable sorted Set of peers, and the Diff between two sets.
// It depends on the standard library and k8s.io/api constants only.
package peer

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// Port is a named network port of a peer, as found in an SRV record, an
// EndpointSlice or a pod spec.
type Port struct {
	Name     string `json:"name,omitempty"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol,omitempty"`
}

// ComparePorts is the order of Peer.Ports: by name, then number, then
// protocol. It suits slices.SortFunc.
func ComparePorts(x, y Port) int {
	return cmp.Or(strings.Compare(x.Name, y.Name), cmp.Compare(x.Port, y.Port), strings.Compare(x.Protocol, y.Protocol))
}

// Peer is one member of a workload as seen by a source. Only FQDN (or Name
// when no FQDN is known) is required; every other field is filled in where
// the source knows it and left zero otherwise.
type Peer struct {
	// FQDN is the member's fully qualified DNS name without the trailing dot,
	// e.g. "web-0.web.default.svc.cluster.local". It is the identity of the
	// peer and what the compatible hook stdin lists.
	FQDN string `json:"fqdn"`
	// Name is the short host name, e.g. "web-0".
	Name string `json:"name,omitempty"`
	// IPs are the member's addresses, all families, sorted.
	IPs []string `json:"ips,omitempty"`
	// Ready, Serving and Terminating mirror EndpointSlice conditions. Sources
	// that cannot tell readiness (DNS) report Ready true.
	Ready       bool `json:"ready"`
	Serving     bool `json:"serving,omitempty"`
	Terminating bool `json:"terminating,omitempty"`
	// Pod, UID, Node and Zone locate the member when a Kubernetes source knows them.
	Pod  string `json:"pod,omitempty"`
	UID  string `json:"uid,omitempty"`
	Node string `json:"node,omitempty"`
	Zone string `json:"zone,omitempty"`
	// Ordinal is the StatefulSet ordinal or Job completion index, -1 when unknown.
	Ordinal int `json:"ordinal"`
	// Role is the member's role in a multi-role job (e.g. "ps", "worker"), if any.
	Role string `json:"role,omitempty"`
	// Ports are the member's ports, sorted by name then number.
	Ports []Port `json:"ports,omitempty"`
	// Labels are the pod's labels when the source has them. The map may be
	// shared (with a source's cache, other sets): it is read-only.
	Labels map[string]string `json:"labels,omitempty"`
	// CPUMillicores is the pod's CPU request in millicores (the sum of its
	// containers' requests), 0 when unknown or none; the pods source fills
	// it. The MPI hostfile's -mpi-slots=auto reads it.
	CPUMillicores int64 `json:"cpuMillicores,omitempty"`
}

// Key is the identity of the peer within a Set: the FQDN, or the Name when
// no FQDN is known.
func (p Peer) Key() string {
	if p.FQDN != "" {
		return p.FQDN
	}
	return p.Name
}

// Equal reports whether two peers carry the same information.
func (p Peer) Equal(q Peer) bool {
	return p.FQDN == q.FQDN && p.Name == q.Name && slices.Equal(p.IPs, q.IPs) &&
		p.Ready == q.Ready && p.Serving == q.Serving && p.Terminating == q.Terminating &&
		p.Pod == q.Pod && p.UID == q.UID && p.Node == q.Node && p.Zone == q.Zone &&
		p.Ordinal == q.Ordinal && p.Role == q.Role && slices.Equal(p.Ports, q.Ports) &&
		maps.Equal(p.Labels, q.Labels) && p.CPUMillicores == q.CPUMillicores
}

// Set is an immutable set of peers sorted by Key, with unique keys.
// The zero Set is empty. Do not modify the slice returned by Peers.
type Set struct {
	peers []Peer
}

// NewSet returns a Set of the given peers, sorted by Key. When several peers
// share a key (one member seen by several sources), they are merged the
// same whatever their order: IPs, ports and labels are united; Ready and
// Serving are true if any of them is, Terminating only if all are; every
// other field takes the value a peer knows (non-empty, an ordinal >= 0),
// and the smaller one when two peers disagree.
func NewSet(peers ...Peer) Set {
	ps := make([]Peer, 0, len(peers))
	index := make(map[string]int, len(peers))
	for _, p := range peers {
		if p.Key() == "" {
			continue
		}
		p.IPs = sortedUnique(p.IPs)
		if i, ok := index[p.Key()]; ok {
			ps[i] = merge(ps[i], p)
			continue
		}
		index[p.Key()] = len(ps)
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b Peer) int { return strings.Compare(a.Key(), b.Key()) })
	return Set{peers: ps}
}

func merge(a, b Peer) Peer {
	a.IPs = sortedUnique(append(slices.Clone(a.IPs), b.IPs...))
	a.Ready = a.Ready || b.Ready
	a.Serving = a.Serving || b.Serving
	a.Terminating = a.Terminating && b.Terminating
	for _, port := range b.Ports {
		if !slices.Contains(a.Ports, port) {
			a.Ports = append(slices.Clone(a.Ports), port)
		}
	}
	slices.SortFunc(a.Ports, ComparePorts)
	for _, f := range [][2]*string{{&a.Name, &b.Name}, {&a.Pod, &b.Pod}, {&a.UID, &b.UID},
		{&a.Node, &b.Node}, {&a.Zone, &b.Zone}, {&a.Role, &b.Role}} {
		if x, y := f[0], *f[1]; *x == "" || y != "" && y < *x {
			*x = y
		}
	}
	if b.Ordinal >= 0 && (a.Ordinal < 0 || b.Ordinal < a.Ordinal) {
		a.Ordinal = b.Ordinal
	}
	if b.CPUMillicores > 0 && (a.CPUMillicores == 0 || b.CPUMillicores < a.CPUMillicores) {
		a.CPUMillicores = b.CPUMillicores
	}
	if len(b.Labels) > 0 {
		labels := maps.Clone(a.Labels)
		if labels == nil {
			labels = make(map[string]string, len(b.Labels))
		}
		for k, v := range b.Labels {
			if w, ok := labels[k]; !ok || v < w {
				labels[k] = v
			}
		}
		a.Labels = labels
	}
	return a
}

func sortedUnique(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// Peers returns the peers in key order. The caller must not modify it.
func (s Set) Peers() []Peer { return s.peers }

// Len returns the number of peers.
func (s Set) Len() int { return len(s.peers) }

// Keys returns the sorted keys (FQDNs) of the peers.
func (s Set) Keys() []string {
	keys := make([]string, len(s.peers))
	for i, p := range s.peers {
		keys[i] = p.Key()
	}
	return keys
}

// Get returns the peer with the given key.
func (s Set) Get(key string) (Peer, bool) {
	i, ok := slices.BinarySearchFunc(s.peers, key, func(p Peer, k string) int { return strings.Compare(p.Key(), k) })
	if !ok {
		return Peer{}, false
	}
	return s.peers[i], true
}

// Has reports whether a peer with the given key is in the set.
func (s Set) Has(key string) bool {
	_, ok := s.Get(key)
	return ok
}

// Equal reports whether both sets hold equal peers.
func (s Set) Equal(t Set) bool {
	return s.Same(t) || slices.EqualFunc(s.peers, t.peers, Peer.Equal)
}

// Same reports whether s and t are one set value (copies of the same Set):
// a constant-time test that implies Equal, since sets are immutable.
func (s Set) Same(t Set) bool {
	return len(s.peers) == len(t.peers) && (len(s.peers) == 0 || &s.peers[0] == &t.peers[0])
}

// Filter returns the subset of peers for which keep returns true.
func (s Set) Filter(keep func(Peer) bool) Set {
	var ps []Peer
	for _, p := range s.peers {
		if keep(p) {
			ps = append(ps, p)
		}
	}
	return Set{peers: ps}
}

// Diff lists the keys added and removed going from old to new, each sorted.
func Diff(old, new Set) (added, removed []string) {
	i, j := 0, 0
	for i < len(old.peers) || j < len(new.peers) {
		switch {
		case j == len(new.peers) || (i < len(old.peers) && old.peers[i].Key() < new.peers[j].Key()):
			removed = append(removed, old.peers[i].Key())
			i++
		case i == len(old.peers) || new.peers[j].Key() < old.peers[i].Key():
			added = append(added, new.peers[j].Key())
			j++
		default:
			i++
			j++
		}
	}
	return added, removed
}
