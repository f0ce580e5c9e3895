package dns

import (
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/flockd/flock/peerfinder/peer"
	"github.com/flockd/flock/peerfinder/source"
)

// Rejected is an SRV target that was not delivered, and why.
type Rejected = source.Rejected

// parse turns an answer into peers, skipping records that do not belong, and
// returns the SRV targets of the queried name it rejected (see source.Member).
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
		name, err := source.Member(target, s.name)
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
