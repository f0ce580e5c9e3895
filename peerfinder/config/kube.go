package config

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Source names for -source.
const (
	SourceDNS           = "dns"
	SourceEndpointSlice = "endpointslice"
	SourcePods          = "pods"
	SourceStatic        = "static"
)

var sourceNames = []string{SourceDNS, SourceEndpointSlice, SourcePods, SourceStatic}

// Kube holds the flags of the Kubernetes API sources and bootstrap safety.
type Kube struct {
	// Kubeconfig and Master locate the API server when running outside a
	// cluster; both empty means the in-cluster config.
	Kubeconfig, Master string
	// Sources are the -source names in the order given (default dns).
	Sources []string
	// IncludeNotReady keeps not-ready (never terminating) members in the
	// endpointslice and pods sources.
	IncludeNotReady bool
	// Selector is the pods source's label selector; SelectorFromSelf lists
	// label keys whose values on the own pod make it instead.
	Selector         string
	SelectorFromSelf []string
	// Events is -events: EventsAuto, EventsOn or EventsOff.
	Events string
	// StaticFile is the static source's file of peer FQDNs.
	StaticFile string
}

// The values of -events.
const (
	EventsAuto = "auto" // when another flag uses the Kubernetes API
	EventsOn   = "on"
	EventsOff  = "off"
)

// EventsEnabled reports whether peer-finder posts Kubernetes Events on its
// pod: -events=on, or auto when a source or bootstrap or hosts-file flag
// already uses the Kubernetes API.
func (c *Config) EventsEnabled() bool {
	switch c.Kube.Events {
	case EventsOn:
		return true
	case EventsAuto:
		return c.Kube.UsesAPI() || c.Bootstrap.NeedsAPI() || c.Sinks.HostsLease != ""
	}
	return false
}

// UsesDNS reports whether the dns source is among the sources.
func (k Kube) UsesDNS() bool { return len(k.Sources) == 0 || slices.Contains(k.Sources, SourceDNS) }

// UsesAPI reports whether a source reads the Kubernetes API.
func (k Kube) UsesAPI() bool {
	return slices.Contains(k.Sources, SourceEndpointSlice) || slices.Contains(k.Sources, SourcePods)
}

// sourcesFlag is -source: comma-separated source names.
type sourcesFlag []string

func (f *sourcesFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(*f, ",")
}

func (f *sourcesFlag) Set(s string) error {
	var out []string
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		switch {
		case !slices.Contains(sourceNames, name):
			return fmt.Errorf("unknown source %q; want %s, or several joined by commas", name, strings.Join(sourceNames, ", "))
		case slices.Contains(out, name):
			return fmt.Errorf("source %q given twice", name)
		}
		out = append(out, name)
	}
	*f = out
	return nil
}

// labelKeysFlag is -selector-from-self: comma-separated label keys.
type labelKeysFlag []string

func (f *labelKeysFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(*f, ",")
}

func (f *labelKeysFlag) Set(s string) error {
	var out []string
	for key := range strings.SplitSeq(s, ",") {
		key = strings.TrimSpace(key)
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return fmt.Errorf("%q is not a label key: %s", key, strings.Join(errs, "; "))
		}
		out = append(out, key)
	}
	*f = out
	return nil
}

// addKubeFlags registers the Kubernetes flags on fs.
func (c *Config) addKubeFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Kube.Kubeconfig, "kubeconfig", "", "Kubeconfig `file` for the Kubernetes API when running outside a cluster; default the in-cluster service account.")
	fs.StringVar(&c.Kube.Master, "master", "", "Kubernetes API server `URL`, overriding the kubeconfig's (e.g. through kubectl proxy).")
	c.Kube.Sources = []string{SourceDNS}
	fs.Var((*sourcesFlag)(&c.Kube.Sources), "source", "Where peers come from, comma-separated `names`: dns (SRV records of the service, polled), endpointslice (watch the service's EndpointSlices; RBAC: list,watch endpointslices.discovery.k8s.io), pods (watch pods by -selector or -selector-from-self; RBAC: list,watch pods, plus get with -selector-from-self), static (the names in -static-file, for dry runs). Combined, e.g. endpointslice,dns, the peer set is the union by FQDN of the sources' latest answers, first delivered once every source answered; a failing source keeps its last answer.")
	fs.BoolVar(&c.Kube.IncludeNotReady, "include-not-ready", false, "Include members that are not ready yet (never terminating ones) in the endpointslice and pods sources, for bootstrap; works without publishNotReadyAddresses on the service.")
	fs.StringVar(&c.Kube.Selector, "selector", "", "Label `selector` of the peer pods for -source=pods, e.g. app=zk (evaluated by the API server).")
	fs.StringVar(&c.Kube.Events, "events", EventsAuto, "Post Kubernetes Events on this pod ($POD_NAME in $POD_NAMESPACE) for the first delivery, the bootstrap role, a failing and recovered hook or file, the bootstrap timeout and forbidden API requests: on, off, or auto (on when another flag uses the Kubernetes API). Needs create,patch on events.events.k8s.io; without it no Event is sent and nothing else changes.")
	fs.StringVar(&c.Kube.StaticFile, "static-file", "", "For -source=static (dry runs, tests, tools that already know the set): a `file` of peer FQDNs, one per line ('#' comments and blank lines skipped), all ready, read again every -poll-period; a file that cannot be read keeps the last set. Entries follow the DNS source's rules: lower-cased, ordinals from <name>-N, and an entry that is not one RFC 1123 label below the service is dropped and logged.")
	fs.Var((*labelKeysFlag)(&c.Kube.SelectorFromSelf), "selector-from-self", "For -source=pods without -selector: label `keys` (comma-separated, e.g. app or app,role) whose values on this pod ($POD_NAME, else the host name) select the peers.")
}

// completeKube validates the Kubernetes flags.
func (c *Config) completeKube(env Env) error {
	k := &c.Kube
	if len(k.Sources) == 0 {
		k.Sources = []string{SourceDNS}
	}
	pods := slices.Contains(k.Sources, SourcePods)
	switch {
	case k.Selector != "" && len(k.SelectorFromSelf) > 0:
		return usage("selector", "set -selector or -selector-from-self, not both")
	case (k.Selector != "" || len(k.SelectorFromSelf) > 0) && !pods:
		flag := "selector"
		if k.Selector == "" {
			flag = "selector-from-self"
		}
		return usage(flag, "applies to -source=pods only")
	case pods && k.Selector == "" && len(k.SelectorFromSelf) == 0:
		return usage("selector", "-source=pods needs -selector (e.g. app=zk) or -selector-from-self (e.g. app)")
	case slices.Contains(k.Sources, SourceStatic) && k.StaticFile == "":
		return usage("static-file", "-source=static needs -static-file")
	case k.StaticFile != "" && !slices.Contains(k.Sources, SourceStatic):
		return usage("static-file", "applies to -source=static only")
	case !slices.Contains([]string{EventsAuto, EventsOn, EventsOff}, k.Events):
		return usage("events", "want auto, on or off, got %q", k.Events)
	case k.IncludeNotReady && !k.UsesAPI():
		return usage("include-not-ready", "applies to the endpointslice and pods sources; DNS cannot tell readiness: set publishNotReadyAddresses: true on the service instead")
	}
	if k.Selector != "" {
		sel, err := labels.Parse(k.Selector)
		if err != nil {
			return usage("selector", "%v", err)
		}
		if sel.Empty() {
			return usage("selector", "%q selects every pod", k.Selector)
		}
	}
	return nil
}
