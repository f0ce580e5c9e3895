package dns

import (
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flockd/flock/peerfinder/peer"
)

// Rejected is an SRV target that was not delivered, and why.
type Rejected struct {
	Target string
	Reason string
}

// String returns "target (reason)" for logs.
func (r Rejected) String() string { return r.Target + " (" + r.Reason + ")" }

// parse turns an answer into peers, skipping records that do not belong, and
// returns the SRV targets of the queried name it rejected (see member).
func (s *Source) parse(resp *dns.Msg) (peer.Set, []Rejected) {
	ips := make(map[string][]string, len(resp.Extra))
	for _, sec := range [][]dns.RR{resp.Extra, resp.Answer} {
		for _, rr := range sec {
			switch rr := rr.(type) {
			case *dns.A:
				owner := dns.CanonicalName(rr.Hdr.Name)
				ips[owner] = append(ips[owner], rr.A.String())
			case *dns.AAAA:
				owner := dns.CanonicalName(rr.Hdr.Name)
				ips[owner] = append(ips[owner], rr.AAAA.String())
			}
		}
	}
	peers := make([]peer.Peer, 0, len(resp.Answer))
	var rejected []Rejected
	skipped := 0
	for _, rr := range resp.Answer {
		srv, ok := rr.(*dns.SRV)
		if !ok || !strings.EqualFold(srv.Hdr.Name, s.name) {
			if rr.Header().Rrtype != dns.TypeA && rr.Header().Rrtype != dns.TypeAAAA {
				skipped++
			}
			continue
		}
		target := dns.CanonicalName(srv.Target)
		name, err := member(target, s.name)
		if err != nil {
			rejected = append(rejected, Rejected{Target: strings.TrimSuffix(target, "."), Reason: err.Error()})
			continue
		}
		p := peer.Peer{
			FQDN:    strings.TrimSuffix(target, "."),
			Name:    name,
			IPs:     ips[target],
			Ready:   true,
			Ordinal: peer.OrdinalFromName(name),
		}
		if srv.Port != 0 {
			p.Ports = []peer.Port{{Port: int32(srv.Port)}}
		}
		peers = append(peers, p)
	}
	if skipped > 0 {
		s.log.Debug("dns answer has records that are not peers; skipped them",
			"name", s.name, "skipped", skipped, "peers", len(peers))
	}
	slices.SortFunc(rejected, func(a, b Rejected) int { return strings.Compare(a.Target, b.Target) })
	return peer.NewSet(peers...), slices.Compact(rejected)
}

// member returns the first label of target when target (absolute, lower
// case) is a member of the service: exactly one label below service, and
// that label a valid RFC 1123 label (letters, digits and inner '-': no '_',
// no leading '-' that a hook would read as an option). Anything else — a
// foreign name, localhost, another service's member, a name deeper below
// the service — could shadow a real member's name in the hosts file and
// count toward -expect, so it is rejected with the reason.
func member(target, service string) (string, error) {
	if !isHostName(target) || !dns.IsSubDomain(service, target) || dns.CountLabel(target) != dns.CountLabel(service)+1 {
		return "", fmt.Errorf("not a member of %s", strings.TrimSuffix(service, "."))
	}
	label, _, _ := strings.Cut(target, ".")
	if errs := validation.IsDNS1123Label(label); len(errs) > 0 {
		return "", fmt.Errorf("not an RFC 1123 name: %s", strings.Join(errs, "; "))
	}
	return label, nil
}

// isHostName reports whether name (absolute, lower case) is a host name made
// of letters, digits, '-' and '_' (not the root, no escaped bytes).
func isHostName(name string) bool {
	if name == "." || len(name) > 254 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(name, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// keepIPs gives each peer that came without glue the IPs it had in last.
// A large answer may carry glue for only some targets (see answerComplete),
// and which ones varies with the server's record order; without this the
// set would change on every poll.
func keepIPs(set, last peer.Set) peer.Set {
	ps := set.Peers()
	var filled []peer.Peer
	for i, p := range ps {
		if len(p.IPs) > 0 {
			continue
		}
		if old, ok := last.Get(p.Key()); ok && len(old.IPs) > 0 {
			if filled == nil {
				filled = slices.Clone(ps)
			}
			filled[i].IPs = old.IPs
		}
	}
	if filled == nil {
		return set
	}
	return peer.NewSet(filled...)
}
