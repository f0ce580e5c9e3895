// Package dnstest runs a real DNS server on loopback for tests.
//
// The server listens on 127.0.0.1 with UDP and TCP on the same, randomly
// chosen port, and answers from a zone that the test changes while it runs:
// SRV, A, AAAA and CNAME records per name, and a per-name Behaviour (an error rcode,
// a delay, no answer at all, malformed records mixed into a good answer, or
// a hostile response: QR clear, another question echoed, another class).
// It honours the EDNS0 UDP size of a query and sets TC when a UDP answer does
// not fit, so large SRV answers only arrive complete over TCP, like CoreDNS;
// with SetShuffle it also shuffles its records as CoreDNS does, so an answer
// too large for all its glue carries a different part of it each time.
//
// Names are case-insensitive and may be given with or without the trailing
// dot. A name without any records or behaviour answers NXDOMAIN; a name with
// records of other types answers NOERROR with an empty answer (NODATA).
package dnstest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TTL is the TTL of every record the server sends.
const TTL = 5

// Behaviour changes how the server answers queries for one name.
// The zero Behaviour answers normally from the zone.
type Behaviour struct {
	// Rcode, when not zero (dns.RcodeSuccess), is sent instead of an answer,
	// e.g. dns.RcodeServerFailure, dns.RcodeNameError, dns.RcodeRefused.
	Rcode int
	// Delay holds the answer back this long (or until the server closes).
	Delay time.Duration
	// Drop sends no answer at all, so the client times out.
	Drop bool
	// Junk mixes irrelevant and malformed records into a good SRV answer:
	// an SRV record of another owner, an SRV with the root target ".", an SRV
	// whose target holds a byte that is not allowed in a host name, an A and
	// a TXT record for the queried name.
	Junk bool

	// The hostile fields below change the response after it was built, as
	// a broken or spoofing server would (the ID is kept).

	// NotResponse clears the QR bit: the answer is sent as a query.
	NotResponse bool
	// QuestionName, QuestionType and QuestionClass, when set, replace what
	// the question section echoes: an answer (or an Rcode such as NXDOMAIN)
	// for another question.
	QuestionName  string
	QuestionType  uint16
	QuestionClass uint16
	// AnswerClass, when set, is the class of every answer record.
	AnswerClass uint16
	// IgnoreUDPSize sends UDP answers whole, TC clear, however much larger
	// than the EDNS0 size the query advertised (up to 64 KiB), as a broken
	// server or middlebox does.
	IgnoreUDPSize bool
}

// forge applies b's hostile fields to resp.
func (b Behaviour) forge(resp *dns.Msg) {
	if b.NotResponse {
		resp.Response = false
	}
	for i := range resp.Question {
		q := &resp.Question[i]
		if b.QuestionName != "" {
			q.Name = dns.Fqdn(b.QuestionName)
		}
		if b.QuestionType != 0 {
			q.Qtype = b.QuestionType
		}
		if b.QuestionClass != 0 {
			q.Qclass = b.QuestionClass
		}
	}
	if b.AnswerClass != 0 {
		for _, rr := range resp.Answer {
			rr.Header().Class = b.AnswerClass
		}
	}
}

// Server is a DNS server on loopback. Its methods are safe for concurrent use.
type Server struct {
	addr string
	udp  *dns.Server
	tcp  *dns.Server
	done chan struct{}

	mu          sync.Mutex
	names       map[string]*entry
	queries     map[string]int // by transport: "udp", "tcp"
	truncateTCP bool
	noGlue      bool
	shuffle     *rand.Rand // nil: records in zone order
}

type entry struct {
	srv       []*dns.SRV
	a, aaaa   []net.IP
	cname     string // with SetCNAME: an alias, its glue follows the chain
	behaviour Behaviour
}

// New starts a server and stops it when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		done:    make(chan struct{}),
		names:   make(map[string]*entry),
		queries: make(map[string]int),
	}
	pc, l, err := listen()
	if err != nil {
		t.Fatalf("dnstest: %v", err)
	}
	s.addr = pc.LocalAddr().String()
	s.udp = s.start(t, &dns.Server{PacketConn: pc, Handler: s})
	s.tcp = s.start(t, &dns.Server{Listener: l, Handler: s})
	t.Cleanup(s.close)
	return s
}

// listen opens UDP and TCP on the same loopback port; another process may
// hold the TCP side of a free UDP port, so it tries a few ports.
func listen() (net.PacketConn, net.Listener, error) {
	var err error
	for range 10 {
		var pc net.PacketConn
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		var l net.Listener
		l, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l, nil
		}
		pc.Close()
	}
	return nil, nil, fmt.Errorf("listen on one port for udp and tcp: %w", err)
}

func (s *Server) start(t testing.TB, srv *dns.Server) *dns.Server {
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	failed := make(chan error, 1)
	go func() { failed <- srv.ActivateAndServe() }()
	select {
	case <-started:
	case err := <-failed:
		t.Fatalf("dnstest: serve: %v", err)
	}
	return srv
}

func (s *Server) close() {
	close(s.done) // releases delayed answers first, so shutdown does not wait for them
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.udp.ShutdownContext(ctx)
	_ = s.tcp.ShutdownContext(ctx)
}

// Addr returns the host:port of the server, the same for UDP and TCP.
func (s *Server) Addr() string { return s.addr }

// SRVRecord is one SRV record to serve.
type SRVRecord struct {
	Target   string
	Port     uint16
	Priority uint16
	Weight   uint16
}

// SetSRV replaces the SRV records of name.
func (s *Server) SetSRV(name string, records ...SRVRecord) {
	rrs := make([]*dns.SRV, len(records))
	for i, r := range records {
		rrs[i] = &dns.SRV{
			Hdr:      dns.RR_Header{Name: canonical(name), Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: TTL},
			Priority: r.Priority, Weight: r.Weight, Port: r.Port, Target: canonical(r.Target),
		}
	}
	s.update(name, func(e *entry) { e.srv = rrs })
}

// SetA replaces the A records of name. It panics on an address that is not IPv4.
func (s *Server) SetA(name string, ips ...string) {
	s.update(name, func(e *entry) { e.a = parseIPs(ips, true) })
}

// SetAAAA replaces the AAAA records of name. It panics on an address that is not IPv6.
func (s *Server) SetAAAA(name string, ips ...string) {
	s.update(name, func(e *entry) { e.aaaa = parseIPs(ips, false) })
}

// SetCNAME makes name an alias of target ("" removes it). An SRV answer
// whose target is an alias carries, as glue, the CNAME chain from it (at
// most 8 links) and the addresses of the chain's end.
func (s *Server) SetCNAME(name, target string) {
	s.update(name, func(e *entry) {
		e.cname = ""
		if target != "" {
			e.cname = canonical(target)
		}
	})
}

// SetBehaviour sets how queries for name are answered.
func (s *Server) SetBehaviour(name string, b Behaviour) {
	s.update(name, func(e *entry) { e.behaviour = b })
}

// Delete removes name and its behaviour, so it answers NXDOMAIN.
func (s *Server) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.names, canonical(name))
}

// SetTruncateTCP makes TCP answers that carry records truncated too (TC set,
// only what fits in 512 bytes), to test clients against an answer that is
// still truncated over TCP.
func (s *Server) SetTruncateTCP(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.truncateTCP = on
}

// SetGlue controls whether SRV answers carry the A/AAAA records of their
// targets in the additional section (on by default, as CoreDNS does).
func (s *Server) SetGlue(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noGlue = !on
}

// SetShuffle controls whether each SRV answer lists its records, and their
// glue, in a new random order (off by default), as CoreDNS does; the order
// is drawn from a fixed seed, so a test sees the same sequence every run.
func (s *Server) SetShuffle(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shuffle = nil
	if on {
		s.shuffle = rand.New(rand.NewPCG(1, 2))
	}
}

// Queries returns how many queries arrived over network ("udp" or "tcp").
func (s *Server) Queries(network string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[network]
}

func (s *Server) update(name string, f func(*entry)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := canonical(name)
	e := s.names[key]
	if e == nil {
		e = &entry{}
		s.names[key] = e
	}
	f(e)
}

func canonical(name string) string { return dns.CanonicalName(name) }

func parseIPs(ips []string, v4 bool) []net.IP {
	out := make([]net.IP, len(ips))
	for i, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil || (ip.To4() != nil) != v4 {
			panic(fmt.Sprintf("dnstest: bad address %q", s))
		}
		out[i] = ip
	}
	return out
}

// ServeDNS implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	network := w.LocalAddr().Network()
	resp, b, size := s.answer(req, network)
	if b.Delay > 0 {
		select {
		case <-time.After(b.Delay):
		case <-s.done:
			return
		}
	}
	if b.Drop {
		return
	}
	b.forge(resp)
	if b.IgnoreUDPSize {
		size = dns.MaxMsgSize
	}
	resp.Truncate(size)
	_ = w.WriteMsg(resp)
}

// answer builds the response under the lock and returns it with the
// behaviour to apply and the size it must fit in.
func (s *Server) answer(req *dns.Msg, network string) (*dns.Msg, Behaviour, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries[network]++

	resp := new(dns.Msg)
	size := dns.MaxMsgSize
	if network == "udp" {
		size = dns.MinMsgSize
	}
	if opt := req.IsEdns0(); opt != nil {
		if network == "udp" {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
		}
		defer resp.SetEdns0(opt.UDPSize(), false)
	}
	if network == "tcp" && s.truncateTCP {
		size = dns.MinMsgSize
	}
	if len(req.Question) != 1 {
		resp.SetRcode(req, dns.RcodeFormatError)
		return resp, Behaviour{}, size
	}
	q := req.Question[0]
	e := s.names[canonical(q.Name)]
	switch {
	case e == nil:
		resp.SetRcode(req, dns.RcodeNameError)
		return resp, Behaviour{}, size
	case e.behaviour.Rcode != dns.RcodeSuccess:
		resp.SetRcode(req, e.behaviour.Rcode)
		return resp, e.behaviour, size
	}
	resp.SetReply(req)
	resp.Authoritative = true
	switch q.Qtype {
	case dns.TypeSRV:
		for _, rr := range e.srv {
			resp.Answer = append(resp.Answer, dns.Copy(rr))
			if !s.noGlue {
				resp.Extra = append(resp.Extra, s.glue(rr.Target)...)
			}
		}
		if e.behaviour.Junk {
			resp.Answer = append(resp.Answer, junk(canonical(q.Name))...)
		}
		if s.shuffle != nil {
			for _, rrs := range [][]dns.RR{resp.Answer, resp.Extra} {
				s.shuffle.Shuffle(len(rrs), func(i, j int) { rrs[i], rrs[j] = rrs[j], rrs[i] })
			}
		}
	case dns.TypeA, dns.TypeAAAA:
		for _, rr := range addressRRs(canonical(q.Name), e) {
			if rr.Header().Rrtype == q.Qtype {
				resp.Answer = append(resp.Answer, rr)
			}
		}
	}
	return resp, e.behaviour, size
}

// glue returns the additional records for an SRV target: the CNAME chain
// from it, if it is an alias, and the addresses of the chain's end.
func (s *Server) glue(name string) []dns.RR {
	var rrs []dns.RR
	for range 8 {
		e := s.names[name]
		if e == nil {
			return rrs
		}
		if e.cname == "" {
			return append(rrs, addressRRs(name, e)...)
		}
		rrs = append(rrs, &dns.CNAME{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: TTL}, Target: e.cname})
		name = e.cname
	}
	return rrs
}

func addressRRs(name string, e *entry) []dns.RR {
	var rrs []dns.RR
	for _, ip := range e.a {
		rrs = append(rrs, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: TTL}, A: ip})
	}
	for _, ip := range e.aaaa {
		rrs = append(rrs, &dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: TTL}, AAAA: ip})
	}
	return rrs
}

// JunkTargets are the SRV targets that Behaviour.Junk adds; a client should
// deliver none of them.
var JunkTargets = []string{"stray.other.example.", ".", "bad\\032name.junk.example."}

func junk(name string) []dns.RR {
	hdr := func(owner string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: owner, Rrtype: t, Class: dns.ClassINET, Ttl: TTL}
	}
	return []dns.RR{
		&dns.SRV{Hdr: hdr("other.example.", dns.TypeSRV), Port: 1, Target: JunkTargets[0]},
		&dns.SRV{Hdr: hdr(name, dns.TypeSRV), Port: 2, Target: JunkTargets[1]},
		&dns.SRV{Hdr: hdr(name, dns.TypeSRV), Port: 3, Target: JunkTargets[2]},
		&dns.A{Hdr: hdr(name, dns.TypeA), A: net.IPv4(192, 0, 2, 1)},
		&dns.TXT{Hdr: hdr(name, dns.TypeTXT), Txt: []string{"not a peer"}},
	}
}

// Peers sets an SRV answer for service with n targets "<prefix>-<i>.<service>",
// each with port and an A record 10.x.y.z, and returns the target FQDNs
// (without the trailing dot) in order.
func (s *Server) Peers(service, prefix string, n int, port uint16) []string {
	service = strings.TrimSuffix(canonical(service), ".")
	records := make([]SRVRecord, n)
	fqdns := make([]string, n)
	for i := range n {
		fqdns[i] = fmt.Sprintf("%s-%d.%s", prefix, i, service)
		records[i] = SRVRecord{Target: fqdns[i], Port: port, Weight: 10}
		s.SetA(fqdns[i], IPv4(i))
	}
	s.SetSRV(service, records...)
	return fqdns
}

// IPv4 returns the address that Peers gives to peer i.
func IPv4(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff) }
