package dns

import (
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/flockd/flock/internal/ordinal"
	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/source"
)

// Rejected is an SRV target that was not delivered, and why.
type Rejected = source.Rejected

// parse turns an answer into peers, skipping records that do not belong, and
// returns the SRV targets of the queried name it rejected (see source.Member).
func (s *Source) parse(resp *dns.Msg) (peer.Set, []Rejected) {
	ips := make(map[string][]string, len(resp.Extra))
	var aliases map[string]string // CNAME owner -> target
	for _, sec := range [][]dns.RR{resp.Extra, resp.Answer} {
		for _, rr := range sec {
			switch rr := rr.(type) {
			case *dns.A:
				owner := dns.CanonicalName(rr.Hdr.Name)
				ips[owner] = append(ips[owner], rr.A.String())
			case *dns.AAAA:
				owner := dns.CanonicalName(rr.Hdr.Name)
				ips[owner] = append(ips[owner], rr.AAAA.String())
			case *dns.CNAME:
				if aliases == nil {
					aliases = map[string]string{}
				}
				aliases[dns.CanonicalName(rr.Hdr.Name)] = dns.CanonicalName(rr.Target)
			}
		}
	}
	peers := make([]peer.Peer, 0, len(resp.Answer))
	var rejected []Rejected
	skipped := 0
	for _, rr := range resp.Answer {
		srv, ok := rr.(*dns.SRV)
		if !ok || !strings.EqualFold(srv.Hdr.Name, s.name) {
			if t := rr.Header().Rrtype; t != dns.TypeA && t != dns.TypeAAAA && t != dns.TypeCNAME {
				skipped++
			}
			continue
		}
		target := dns.CanonicalName(srv.Target)
		name, err := source.Member(target, s.name)
		if err != nil {
			rejected = append(rejected, Rejected{Target: strings.TrimSuffix(target, "."), Reason: err.Error()})
			continue
		}
		p := peer.Peer{
			FQDN:    strings.TrimSuffix(target, "."),
			Name:    name,
			IPs:     ips[resolveAlias(target, aliases)],
			Ready:   true,
			Ordinal: ordinal.FromName(name),
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

// maxCNAMEChain bounds the CNAME links followed from an SRV target, as
// resolvers bound theirs (Go's and glibc's follow 8 or so).
const maxCNAMEChain = 8

// resolveAlias follows the CNAME chain from target through aliases (the
// response's CNAME records) and returns the name whose addresses the
// target has: target itself when it is no alias, the chain's end
// otherwise. A chain that loops or is longer than maxCNAMEChain ends
// nowhere (""), so the peer gets no addresses from this response. RFC 2782
// forbids an alias as an SRV target, but upstream's resolver followed one,
// so manifests relying on it keep working. The peer is still named by its
// SRV target, which passed source.Member; the chain only gives addresses.
func resolveAlias(target string, aliases map[string]string) string {
	for range maxCNAMEChain + 1 {
		next, ok := aliases[target]
		if !ok {
			return target
		}
		target = next
	}
	return ""
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
