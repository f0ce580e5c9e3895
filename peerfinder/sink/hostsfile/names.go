package hostsfile

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/peerfinder/peer"
)

// DefaultNameTemplate names each member by its pod host name.
const DefaultNameTemplate = "{{.Name}}"

// Member is what name templates see for each peer. Templates use its fields,
// e.g. "{{.Role}}-{{.Index}}" or `{{index .Labels "app"}}-{{.Ordinal}}`
// (Go template syntax; what a template may use is listed at nameTemplate).
type Member struct {
	// Name is the short host name ("web-0"); the first label of FQDN when the
	// source did not say.
	Name string
	// FQDN is the fully qualified name without trailing dot.
	FQDN string
	// Pod is the pod name when known.
	Pod string
	// Role is the peer's role in a multi-role job, when known.
	Role string
	// Index is the member's index as a string: from the configured index
	// label, else the StatefulSet pod-index label, else the Job completion
	// index label, else the ordinal; "" when none is known.
	Index string
	// Ordinal is the source's ordinal, -1 when unknown.
	Ordinal int
	// Node and Zone locate the member when known.
	Node, Zone string
	// Labels are the pod's labels (nil when the source has none).
	Labels map[string]string
}

// Family selects which addresses are written.
type Family int

const (
	// AllFamilies writes IPv4 and IPv6 addresses.
	AllFamilies Family = iota
	// IPv4 writes IPv4 addresses only.
	IPv4
	// IPv6 writes IPv6 addresses only.
	IPv6
)

// String returns the flag spelling.
func (f Family) String() string {
	switch f {
	case IPv4:
		return "ipv4"
	case IPv6:
		return "ipv6"
	}
	return "all"
}

// ParseFamily parses "ipv4", "ipv6" or "all" (also "" for all).
func ParseFamily(s string) (Family, error) {
	switch strings.ToLower(s) {
	case "", "all", "any", "dual":
		return AllFamilies, nil
	case "ipv4", "4", "v4":
		return IPv4, nil
	case "ipv6", "6", "v6":
		return IPv6, nil
	}
	return AllFamilies, fmt.Errorf("unknown ip family %q (want ipv4, ipv6 or all)", s)
}

func (f Family) keep(a netip.Addr) bool {
	switch f {
	case IPv4:
		return a.Is4() || a.Is4In6()
	case IPv6:
		return a.Is6() && !a.Is4In6()
	}
	return true
}

// Namer turns peers into host names. It is immutable once built and safe
// for concurrent use.
type Namer struct {
	name       *nameTemplate
	aliases    []*nameTemplate
	indexLabel string
}

// NewNamer parses the name template (DefaultNameTemplate when empty) and the
// alias templates. indexLabel, when set, is the label read for Member.Index
// before the well-known ones.
func NewNamer(nameTemplate string, aliasTemplates []string, indexLabel string) (*Namer, error) {
	if nameTemplate == "" {
		nameTemplate = DefaultNameTemplate
	}
	n := &Namer{indexLabel: indexLabel}
	var err error
	if n.name, err = parseName("name", nameTemplate); err != nil {
		return nil, err
	}
	for i, a := range aliasTemplates {
		t, err := parseName(fmt.Sprintf("alias%d", i), a)
		if err != nil {
			return nil, err
		}
		n.aliases = append(n.aliases, t)
	}
	return n, nil
}

func parseName(name, text string) (*nameTemplate, error) {
	t, err := parseTemplate(name, text)
	if err != nil {
		return nil, fmt.Errorf("host name template %q: %w", text, err)
	}
	return t, nil
}

// MemberOf returns the template view of p.
func (n *Namer) MemberOf(p peer.Peer) Member {
	m := Member{
		Name: p.Name, FQDN: p.FQDN, Pod: p.Pod, Role: p.Role, Ordinal: p.Ordinal,
		Node: p.Node, Zone: p.Zone, Labels: p.Labels,
	}
	if m.Name == "" {
		m.Name, _, _ = strings.Cut(p.FQDN, ".")
	}
	for _, l := range []string{n.indexLabel, ordinal.PodIndexLabel, ordinal.JobCompletionIndexLabel} {
		if v, ok := p.Labels[l]; ok && l != "" {
			m.Index = v
			break
		}
	}
	if m.Index == "" && p.Ordinal >= 0 {
		m.Index = strconv.Itoa(p.Ordinal)
	}
	return m
}

// names executes the templates for p: its host name and aliases.
func (n *Namer) names(p peer.Peer) (string, []string, error) {
	m := n.MemberOf(p)
	name, err := execute(n.name, m)
	if err != nil {
		return "", nil, err
	}
	var aliases []string
	for _, t := range n.aliases {
		a, err := execute(t, m)
		if err != nil {
			return "", nil, err
		}
		if a != "" && a != name && !slices.Contains(aliases, a) {
			aliases = append(aliases, a)
		}
	}
	return name, aliases, nil
}

func execute(t *nameTemplate, m Member) (string, error) {
	s, err := t.execute(m)
	if err != nil {
		return "", fmt.Errorf("host name template: %w", err)
	}
	return strings.TrimSpace(s), nil
}

// ValidName returns nil when name may be written as a host name: a lower-case
// RFC 1123 subdomain (labels of letters, digits and '-', separated by dots).
func ValidName(name string) error {
	if name == "" {
		return fmt.Errorf("empty host name")
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("host name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// MaxExpected bounds the number of expected names (ParseExpected,
// ExpectedFromCount), so a typo cannot allocate billions of names.
const MaxExpected = 100_000

// ParseExpected parses an expected-names spec: a comma-separated list whose
// items are either "role=replicas" (expanding to role-0 … role-(replicas-1))
// or a literal host name. "ps=1,worker=3" gives ps-0, worker-0, worker-1,
// worker-2. The result is sorted (naturally) and free of duplicates.
func ParseExpected(spec string) ([]string, error) {
	var names []string
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		role, count, ok := strings.Cut(item, "=")
		if !ok {
			if err := ValidName(item); err != nil {
				return nil, fmt.Errorf("expected names %q: %w", spec, err)
			}
			names = append(names, item)
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(count))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("expected names %q: replicas of %q must be a non-negative integer", spec, role)
		}
		if n > MaxExpected-len(names) {
			return nil, fmt.Errorf("expected names %q: more than %d names", spec, MaxExpected)
		}
		role = strings.TrimSpace(role)
		for i := range n {
			name := role + "-" + strconv.Itoa(i)
			if err := ValidName(name); err != nil {
				return nil, fmt.Errorf("expected names %q: %w", spec, err)
			}
			names = append(names, name)
		}
	}
	return sortNames(names), nil
}

// sortNames sorts names naturally and drops duplicates.
func sortNames(names []string) []string {
	// Ties of the natural order ("0" and "00") fall back to bytes, so equal
	// names end up next to each other for Compact.
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(naturalCompare(a, b), strings.Compare(a, b)) })
	return slices.Compact(names)
}

// ExpectedFromCount returns the n names a StatefulSet-style workload has when
// self is one of its members: self "web-2" and n 3 give web-0, web-1, web-2.
// It fails when self has no "-<ordinal>" suffix.
func ExpectedFromCount(self string, n int) ([]string, error) {
	host, _, _ := strings.Cut(self, ".")
	if ordinal.FromName(host) < 0 {
		return nil, fmt.Errorf("cannot derive expected names from %q: no -<ordinal> suffix", self)
	}
	if n < 0 || n > MaxExpected {
		return nil, fmt.Errorf("cannot derive %d expected names: at most %d", n, MaxExpected)
	}
	prefix := host[:strings.LastIndexByte(host, '-')+1]
	names := make([]string, 0, n)
	for j := range n {
		names = append(names, prefix+strconv.Itoa(j))
	}
	return names, nil
}

// naturalCompare orders strings with digit runs compared by value, so
// "worker-2" sorts before "worker-10".
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
