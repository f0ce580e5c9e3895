package peerfinder

import (
	"cmp"
	"slices"
	"strings"

	"github.com/flockd/flock/peerfinder/config"
	"github.com/flockd/flock/peerfinder/source/endpointslice"
	"github.com/flockd/flock/peerfinder/source/pods"
)

// access is one RBAC permission peer-finder needs in its own namespace.
type access struct {
	Verb     string
	Group    string // API group, "" for core
	Resource string // plural resource
	Name     string // one object, "" for any
	// For names the flags that need it.
	For []string
}

// String is the permission in kubectl's words, e.g.
// "get leases.coordination.k8s.io/db-cluster".
func (a access) String() string {
	s := a.Verb + " " + a.Resource
	if a.Group != "" {
		s += "." + a.Group
	}
	if a.Name != "" {
		s += "/" + a.Name
	}
	return s
}

// requiredAccess lists the permissions cfg needs, sorted, one per verb,
// resource and object. It is pure; examples/rbac grants exactly these and
// diagnose checks them with SelfSubjectAccessReviews.
func requiredAccess(cfg *config.Config) []access {
	var out []access
	add := func(why, group, resource, name string, verbs ...string) {
		for _, v := range verbs {
			i := slices.IndexFunc(out, func(a access) bool {
				return a.Verb == v && a.Group == group && a.Resource == resource && a.Name == name
			})
			if i < 0 {
				out = append(out, access{Verb: v, Group: group, Resource: resource, Name: name})
				i = len(out) - 1
			}
			if !slices.Contains(out[i].For, why) {
				out[i].For = append(out[i].For, why)
			}
		}
	}
	for _, s := range cfg.Kube.Sources {
		switch s {
		case config.SourceEndpointSlice:
			add("-source=endpointslice", "discovery.k8s.io", "endpointslices", "", endpointslice.Verbs...)
		case config.SourcePods:
			add("-source=pods", "", "pods", "", pods.Config{SelectorFromSelf: cfg.Kube.SelectorFromSelf}.Verbs()...)
		}
	}
	b := cfg.Bootstrap
	if b.ExpectAuto {
		add("-expect=auto", "", "pods", "", "get")
		add("-expect=auto", "apps", "statefulsets", "", "list", "watch")
	}
	if cfg.Sinks.ExpectAuto {
		add("-hosts-expect=auto", "", "pods", "", "get")
		add("-hosts-expect=auto", "batch", "jobs", "", "list")
	}
	if b.ClusterLease != "" {
		add("-cluster-lease", "coordination.k8s.io", "leases", "", "create")
		add("-cluster-lease", "coordination.k8s.io", "leases", b.ClusterLease, "get", "update")
		// the data identities of this pod and of the recorded members
		add("-cluster-lease", "", "pods", "", "get")
		add("-cluster-lease", "", "persistentvolumeclaims", "", "get")
	}
	if l := cfg.Sinks.HostsLease; l != "" {
		// client-go leader election: get and update the Lease, create it
		// when absent (create cannot be limited to a name).
		add("-hosts-lease", "coordination.k8s.io", "leases", "", "create")
		add("-hosts-lease", "coordination.k8s.io", "leases", l, "get", "update")
	}
	sortAccess(out)
	return out
}

// optionalAccess lists the permissions cfg can use but does without: those
// of -events. It is pure; diagnose reports them without failing.
func optionalAccess(cfg *config.Config) []access {
	if !cfg.EventsEnabled() {
		return nil
	}
	var out []access
	for _, v := range []string{"create", "patch"} {
		out = append(out, access{Verb: v, Group: "events.k8s.io", Resource: "events", For: []string{"-events"}})
	}
	sortAccess(out)
	return out
}

func sortAccess(out []access) {
	slices.SortFunc(out, func(a, b access) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Resource, b.Resource),
			strings.Compare(a.Name, b.Name), strings.Compare(a.Verb, b.Verb))
	})
}
