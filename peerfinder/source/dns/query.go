package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/miekg/dns"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/flockd/flock/peerfinder/peer"
)

// ErrTruncated means an answer was still truncated over TCP: it would be a
// partial peer set, so it is treated as a failure.
var ErrTruncated = errors.New("answer still truncated over TCP")

// ErrMismatch means a response did not answer the query: QR clear, another
// question echoed, or answer records of another class. Such a response is
// skipped, as one with another ID is; the query fails with it when no
// matching response follows in time.
var ErrMismatch = errors.New("response does not answer the query")

// errOversize means a UDP response was larger than the EDNS0 size the query
// advertised, without TC: the read cut it, so it is asked again over TCP,
// as a truncated one is.
var errOversize = errors.New("udp answer larger than the advertised size, without TC")

// RcodeError is a DNS error response other than NXDOMAIN from one server.
type RcodeError struct {
	Rcode int
}

func (e *RcodeError) Error() string { return "rcode " + dns.RcodeToString[e.Rcode] }

// lookupMembers is lookup that also returns the SRV targets it rejected.
func (s *Source) lookupMembers(ctx context.Context) (peer.Set, []Rejected, error) {
	if s.metrics != nil {
		s.metrics.Lookups.Inc()
	}
	var errs []error
	nxdomain := 0
	for attempt := range s.attempts {
		if attempt > 0 {
			errs, nxdomain = errs[:0], 0
		}
		for _, server := range s.servers {
			a, err := s.query(ctx, server)
			if err == nil {
				switch a.rcode {
				case dns.RcodeSuccess:
					return a.set, a.rejected, nil
				case dns.RcodeNameError:
					nxdomain++
					continue
				default:
					err = &RcodeError{Rcode: a.rcode}
				}
			}
			if ctx.Err() != nil {
				return peer.Set{}, nil, fmt.Errorf("dns lookup %s: %w", s.name, ctx.Err())
			}
			err = fmt.Errorf("server %s: %w", server, err)
			if s.metrics != nil {
				s.metrics.Failures.WithLabelValues(Reason(err)).Inc()
				if errors.Is(err, ErrTruncated) {
					s.metrics.Truncated.Inc()
				}
			}
			errs = append(errs, err)
		}
		if nxdomain == len(s.servers) {
			return peer.Set{}, nil, nil
		}
	}
	return peer.Set{}, nil, fmt.Errorf("dns lookup %s: %w", s.name, errors.Join(errs...))
}

// answer is what one server's response means.
type answer struct {
	rcode    int
	set      peer.Set // with RcodeSuccess
	rejected []Rejected
}

// lastAnswer is a server's last complete response, to skip parsing it again.
type lastAnswer struct {
	fp uint64 // its fingerprint
	answer
	// glue holds, by owner, the addresses (glueAddr encodings) the owner had in
	// the last parsed response that carried glue for it, since the
	// fingerprint last changed: the addresses its peer was delivered with
	// (a peer whose glue did not fit keeps its IPs, see keepIPs).
	glue map[string]string
}

// query asks one server over UDP, and again over TCP if the answer is
// truncated. A server whose answers needed TCP is asked over TCP first
// from then on (until a TCP answer would fit in UDP again), saving the
// truncated UDP round trip on every poll. A response with the answer
// records of the server's last complete one (in any order: see
// fingerprint) whose glue gives each owner only addresses it was last
// parsed with is not parsed again: its answer is the last one's (see
// decode).
func (s *Source) query(ctx context.Context, server string) (answer, error) {
	m := new(dns.Msg)
	m.SetQuestion(s.name, dns.TypeSRV)
	m.SetEdns0(udpSize, false)
	s.mu.Lock()
	tcpFirst := s.tcpFirst[server]
	s.mu.Unlock()
	var (
		raw []byte
		err error
	)
	if !tcpFirst {
		raw, err = s.exchange(ctx, s.udp, m, server)
		oversize := errors.Is(err, errOversize)
		if err != nil && !oversize {
			return answer{}, err
		}
		if !oversize && !truncated(raw) {
			return s.decode(server, raw, false)
		}
		s.setTCPFirst(server, true)
	}
	raw, err = s.exchange(ctx, s.tcp, m, server)
	if err != nil {
		if tcpFirst {
			return answer{}, err
		}
		return answer{}, fmt.Errorf("tcp after truncated or oversize udp answer: %w", err)
	}
	if len(raw) <= udpSize {
		s.setTCPFirst(server, false) // UDP would do again
	}
	return s.decode(server, raw, true)
}

func (s *Source) setTCPFirst(server string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tcpFirst[server] = on
}

// truncated reports the TC bit of a raw response.
func truncated(raw []byte) bool { return len(raw) > 2 && raw[2]&0x02 != 0 }

// decode turns a raw response into an answer, reusing the server's last one
// when it would parse into the same: the same records (fingerprint), and
// glue that gives each owner only addresses it had when last parsed.
// Comparing with every address seen since the fingerprint changed instead
// would take an address that changes back (a pod re-created twice, IPAM
// handing the freed address back) for a known one and keep the newer one
// for good. Glue missing for an owner changes nothing, as its peer keeps its
// IPs (keepIPs), so answers too large for all their glue, carrying a
// different part of it each time, are still not parsed once every owner
// was.
func (s *Source) decode(server string, raw []byte, overTCP bool) (answer, error) {
	s.mu.Lock()
	last, haveLast := s.last[server]
	s.mu.Unlock()
	known := true
	fp, fpOK := fingerprint(raw, func(owner, addr []byte) {
		known = known && hasAddr(last.glue[string(owner)], addr)
	})
	if haveLast && fpOK && last.fp == fp && known {
		if s.metrics != nil && s.metrics.Unchanged != nil {
			s.metrics.Unchanged.Inc()
		}
		return last.answer, nil
	}
	resp := new(dns.Msg)
	if err := resp.Unpack(raw); err != nil {
		return answer{}, err
	}
	if overTCP && resp.Truncated && !answerComplete(resp) {
		return answer{}, fmt.Errorf("%w (%d answers in the partial response)", ErrTruncated, len(resp.Answer))
	}
	a := answer{rcode: resp.Rcode}
	if resp.Rcode == dns.RcodeSuccess {
		a.set, a.rejected = s.parse(resp)
	}
	if fpOK {
		var before map[string]string
		if haveLast && last.fp == fp {
			before = last.glue
		}
		glue := parsedGlue(before, raw)
		s.mu.Lock()
		s.last[server] = lastAnswer{fp: fp, answer: a, glue: glue}
		s.mu.Unlock()
	}
	return a, nil
}

// parsedGlue returns the glue addresses by owner after parsing raw: the
// addresses raw carries for each owner it has glue for, and before's (nil
// after a change of fingerprint) for the others. before is not modified: a
// Lookup beside Run may still read it.
func parsedGlue(before map[string]string, raw []byte) map[string]string {
	glue := make(map[string]string, len(before))
	fingerprint(raw, func(owner, addr []byte) { glue[string(owner)] += glueAddr(addr) })
	for owner, addrs := range before {
		if _, ok := glue[owner]; !ok {
			glue[owner] = addrs
		}
	}
	return glue
}

// answerComplete reports whether a response flagged TC still holds its
// whole answer section. Servers fill the sections in order (answer,
// authority, additional) and stop at the first record that does not fit, so
// any authority or additional record (other than the OPT pseudo-record)
// proves that every answer made it. CoreDNS sets TC over TCP when it only
// dropped additional records (glue for about 900 or more SRV targets),
// which RFC 2181 §9 says it should not; such an answer is complete and is
// delivered, its peers without glue having no IPs. A TC answer with nothing
// after the answer section may have been cut inside it, so it stays a failure.
func answerComplete(resp *dns.Msg) bool {
	if len(resp.Ns) > 0 {
		return true
	}
	for _, rr := range resp.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			return true
		}
	}
	return false
}

// exchange sends m to server through c and returns the raw response that
// answers m (see answers) within the query timeout. Others are skipped
// (RFC 5452 §9.1): a response with another ID silently, as miekg/dns's
// Exchange does; one with m's ID that does not answer m is remembered, and
// the query fails with it when nothing better arrives.
func (s *Source) exchange(ctx context.Context, c *dns.Client, m *dns.Msg, server string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	co, err := c.DialContext(ctx, server)
	if err != nil {
		return nil, err
	}
	defer co.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = co.SetDeadline(d)
	}
	co.UDPSize = udpSize + 1 // one byte more shows a server that ignored our size
	if err := co.WriteMsg(m); err != nil {
		return nil, err
	}
	var mismatch error
	for {
		raw, err := co.ReadMsgHeader(nil)
		if err != nil {
			if mismatch != nil {
				return nil, fmt.Errorf("%w; then %w", mismatch, err)
			}
			return nil, err
		}
		if len(raw) < 12 {
			return nil, dns.ErrShortRead
		}
		if binary.BigEndian.Uint16(raw) != m.Id {
			continue
		}
		if c.Net == "udp" && len(raw) > udpSize {
			return nil, errOversize
		}
		if mismatch = answers(raw, m.Question[0]); mismatch == nil {
			return raw, nil
		}
	}
}

// answers reports why raw, a response with the query's ID, does not answer
// the question q: it must be a response (QR set), echo exactly q (the name
// compared case-insensitively, as servers may echo it in another case, the
// type and the class), and hold answer records of q's class only. An
// NXDOMAIN for another name is thus no authoritative empty set.
func answers(raw []byte, q dns.Question) error {
	var p dnsmessage.Parser
	h, err := p.Start(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMismatch, err)
	}
	if !h.Response {
		return fmt.Errorf("%w: QR not set", ErrMismatch)
	}
	if binary.BigEndian.Uint16(raw[4:]) != 1 {
		return fmt.Errorf("%w: %d questions", ErrMismatch, binary.BigEndian.Uint16(raw[4:]))
	}
	name, off, err := dns.UnpackDomainName(raw, 12) // escaped: a '.' inside a label stays one
	if err != nil || off+4 > len(raw) {
		return fmt.Errorf("%w: bad question", ErrMismatch)
	}
	qtype, qclass := binary.BigEndian.Uint16(raw[off:]), binary.BigEndian.Uint16(raw[off+2:])
	if !strings.EqualFold(name, q.Name) || qtype != q.Qtype || qclass != q.Qclass {
		return fmt.Errorf("%w: question %s %s %s", ErrMismatch, name, dns.ClassToString[qclass], dns.TypeToString[qtype])
	}
	if err := p.SkipAllQuestions(); err != nil {
		return fmt.Errorf("%w: %w", ErrMismatch, err)
	}
	for {
		rh, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrMismatch, err)
		}
		if uint16(rh.Class) != q.Qclass {
			return fmt.Errorf("%w: answer record of class %s", ErrMismatch, dns.ClassToString[uint16(rh.Class)])
		}
		if err := p.SkipAnswer(); err != nil {
			return fmt.Errorf("%w: %w", ErrMismatch, err)
		}
	}
}

// Reason classifies a lookup error for metrics and logs: "timeout",
// "truncated", "servfail", "refused", "rcode", "mismatch", "malformed" or
// "network".
// For an error of a lookup it is the reason of the first server that failed.
func Reason(err error) string {
	err = firstLeaf(err)
	var rc *RcodeError
	var nerr net.Error
	var derr *dns.Error
	switch {
	case errors.Is(err, ErrTruncated):
		return "truncated"
	case errors.Is(err, ErrMismatch):
		return "mismatch"
	case errors.As(err, &rc):
		switch rc.Rcode {
		case dns.RcodeServerFailure:
			return "servfail"
		case dns.RcodeRefused:
			return "refused"
		}
		return "rcode"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return "timeout"
	case errors.As(err, &derr):
		return "malformed"
	}
	return "network"
}

// firstLeaf follows the wrap chain of err into the first error of any join.
func firstLeaf(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			if errs := j.Unwrap(); len(errs) > 0 {
				return firstLeaf(errs[0])
			}
		}
	}
	return err
}
