package dns

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flockd/flock/internal/testing/dnstest"
	"github.com/flockd/flock/peerfinder/peer"
)

// TestTCPFirstOnceAnswersNeedIt: after one truncated UDP answer the server
// is asked over TCP directly; once the answer fits in UDP again, UDP first.
func TestTCPFirstOnceAnswersNeedIt(t *testing.T) {
	s := dnstest.New(t)
	s.Peers(svc, "web", 200, 80)
	src, err := New(Config{Name: svc, Servers: []string{s.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(want int) {
		t.Helper()
		got, err := src.Lookup(context.Background())
		if err != nil || len(got) != want {
			t.Fatalf("got %d peers, err %v; want %d", len(got), err, want)
		}
	}
	counts := func() (int, int) { return s.Queries("udp"), s.Queries("tcp") }
	lookup(200)
	if u, c := counts(); u != 1 || c != 1 {
		t.Fatalf("first lookup: queries udp %d tcp %d, want 1 and 1", u, c)
	}
	for range 3 {
		lookup(200)
	}
	if u, c := counts(); u != 1 || c != 4 {
		t.Errorf("three more lookups: queries udp %d tcp %d, want 1 and 4 (TCP first)", u, c)
	}
	s.Peers(svc, "web", 3, 80) // fits in UDP again
	lookup(3)                  // over TCP, which shows it fits
	lookup(3)
	if u, c := counts(); u != 2 || c != 5 {
		t.Errorf("after the answer shrank: queries udp %d tcp %d, want 2 and 5 (UDP first again)", u, c)
	}
}

// TestUnchangedAnswerNotParsedAgain: an answer equal to the last one is
// not parsed again and gives the same peers; a changed one is parsed.
func TestUnchangedAnswerNotParsedAgain(t *testing.T) {
	s := dnstest.New(t)
	s.Peers(svc, "web", 50, 80)
	m := NewMetrics(prometheus.NewRegistry())
	src, err := New(Config{Name: svc, Servers: []string{s.Addr()}, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	first, err := src.lookup(context.Background())
	if err != nil || first.Len() != 50 {
		t.Fatalf("got %d peers, err %v", first.Len(), err)
	}
	for range 3 {
		again, err := src.lookup(context.Background())
		if err != nil || !again.Equal(first) {
			t.Fatalf("unchanged answer: got %d peers, err %v; want the first set", again.Len(), err)
		}
	}
	if n := testutil.ToFloat64(m.Unchanged); n != 3 {
		t.Errorf("unchanged answers %v, want 3", n)
	}
	// Same SRV records, a new address for one (a pod re-created): parsed.
	s.SetA("web-7."+svc, "10.9.9.9")
	moved, err := src.lookup(context.Background())
	if err != nil || moved.Len() != 50 {
		t.Fatalf("new address: got %d peers, err %v", moved.Len(), err)
	}
	if p, _ := moved.Get("web-7." + svc); len(p.IPs) != 1 || p.IPs[0] != "10.9.9.9" {
		t.Errorf("web-7 after its address changed: %+v, want IP 10.9.9.9", p)
	}
	s.Peers(svc, "web", 51, 80)
	changed, err := src.lookup(context.Background())
	if err != nil || changed.Len() != 51 {
		t.Fatalf("changed answer: got %d peers, err %v; want 51", changed.Len(), err)
	}
	if n := testutil.ToFloat64(m.Unchanged); n != 3 {
		t.Errorf("unchanged answers %v after a change, want still 3", n)
	}
}

// TestShuffledAnswerNotParsedAgain: at 1,000 peers each answer carries a
// different part of the glue (CoreDNS shuffles its records); once every
// address was seen, such answers are not parsed again (the idle CPU of
// issue 14 #2).
func TestShuffledAnswerNotParsedAgain(t *testing.T) {
	s := dnstest.New(t)
	s.Peers(svc, "web", 1000, 80)
	s.SetShuffle(true)
	m := NewMetrics(prometheus.NewRegistry())
	src, err := New(Config{Name: svc, Servers: []string{s.Addr()}, Metrics: m, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lookups := func(n int) float64 {
		t.Helper()
		before := testutil.ToFloat64(m.Unchanged)
		for range n {
			if set, err := src.lookup(context.Background()); err != nil || set.Len() != 1000 {
				t.Fatalf("got %d peers, err %v", set.Len(), err)
			}
		}
		return testutil.ToFloat64(m.Unchanged) - before
	}
	lookups(30) // until every address was seen
	if n := lookups(20); n < 18 {
		t.Errorf("%v of 20 shuffled answers not parsed again, want at least 18", n)
	}
}

// TestFingerprint: the records' order and TTLs do not change it (CoreDNS
// shuffles its answers; a caching server counts TTLs down); a changed
// target, port or rcode does; glue is handed over pair by pair.
func TestFingerprint(t *testing.T) {
	const fq = svc + "."
	msg := func(mod func(*dns.Msg)) []byte {
		m := new(dns.Msg)
		m.SetQuestion(fq, dns.TypeSRV)
		m.Response = true
		for i, name := range []string{"web-0", "web-1", "web-2"} {
			target := name + "." + fq
			m.Answer = append(m.Answer, &dns.SRV{Hdr: dns.RR_Header{Name: fq, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: 30}, Port: 80, Target: target})
			m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: target, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(10, 0, 0, byte(i+1))})
		}
		m.SetEdns0(udpSize, false)
		if mod != nil {
			mod(m)
		}
		raw, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	// fp is the fingerprint and the glue pairs, sorted.
	type print struct {
		fp   uint64
		glue string
	}
	fp := func(raw []byte) print {
		t.Helper()
		var glue []string
		f, ok := fingerprint(raw, func(owner, addr []byte) { glue = append(glue, string(owner)+"="+net.IP(addr).String()) })
		if !ok {
			t.Fatal("fingerprint: does not parse")
		}
		slices.Sort(glue)
		return print{f, strings.Join(glue, " ")}
	}
	base := fp(msg(nil))
	for name, mod := range map[string]func(*dns.Msg){
		"answers reversed": func(m *dns.Msg) { slices.Reverse(m.Answer) },
		"glue rotated":     func(m *dns.Msg) { m.Extra = append(m.Extra[1:3:3], m.Extra[0], m.Extra[3]) },
		"ttls counted down": func(m *dns.Msg) {
			for _, rr := range append(m.Answer, m.Extra...) {
				rr.Header().Ttl = 7
			}
		},
		"compressed": func(m *dns.Msg) { m.Compress = true },
	} {
		if got := fp(msg(mod)); got != base {
			t.Errorf("%s: fingerprint changed", name)
		}
	}
	for name, mod := range map[string]func(*dns.Msg){
		"target":    func(m *dns.Msg) { m.Answer[1].(*dns.SRV).Target = "web-9." + fq },
		"port":      func(m *dns.Msg) { m.Answer[1].(*dns.SRV).Port = 81 },
		"address":   func(m *dns.Msg) { m.Extra[2].(*dns.A).A = net.IPv4(10, 0, 0, 9) },
		"glue lost": func(m *dns.Msg) { m.Extra = append(m.Extra[:1], m.Extra[2:]...) },
		"rcode":     func(m *dns.Msg) { m.Rcode = dns.RcodeServerFailure },
		"truncated": func(m *dns.Msg) { m.Truncated = true },
		"a peer more": func(m *dns.Msg) {
			m.Answer = append(m.Answer, &dns.SRV{Hdr: dns.RR_Header{Name: fq, Rrtype: dns.TypeSRV, Class: dns.ClassINET}, Port: 80, Target: "web-3." + fq})
		},
	} {
		if got := fp(msg(mod)); got.fp == base.fp && got.glue == base.glue {
			t.Errorf("%s: fingerprint and glue unchanged", name)
		}
	}
	if _, ok := fingerprint([]byte{1, 2, 3}, func(_, _ []byte) {}); ok {
		t.Error("fingerprint of 3 bytes succeeded")
	}
}

// TestHasAddr: an owner's addresses, IPv4 and IPv6 one after the other,
// are told apart by length, not found inside one another.
func TestHasAddr(t *testing.T) {
	v4, v6 := net.ParseIP("10.0.0.2").To4(), net.ParseIP("fd00::a00:2")
	addrs := glueAddr(v6) + glueAddr(v4)
	for _, tc := range []struct {
		addrs string
		addr  net.IP
		want  bool
	}{
		{addrs, v4, true},
		{addrs, v6, true},
		{addrs, net.ParseIP("10.0.0.5").To4(), false},
		{glueAddr(v6), v6[12:], false}, // the tail of an IPv6 address
		{"", v4, false},
		{"\x10\x01", v4, false}, // cut short
	} {
		if got := hasAddr(tc.addrs, tc.addr); got != tc.want {
			t.Errorf("hasAddr(%q, %v) = %v, want %v", tc.addrs, tc.addr, got, tc.want)
		}
	}
}

// TestRunAddressChangedBackIsSent: a peer whose address changes and then
// changes back, its SRV record the same throughout (a pod re-created twice,
// IPAM handing the freed address back), is sent with each address in turn
// (issue 36 #1: the change back was taken for an unchanged answer). With
// shuffled, the answer is too large for all its glue and each carries a
// different part of it, as CoreDNS's do at 1,000 peers: after enough polls
// for every address to have been seen, the change shows in the first answer
// that carries the peer's glue.
func TestRunAddressChangedBackIsSent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		peers    int
		shuffled bool
	}{{"small", 3, false}, {"shuffled-1000", 1000, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := dnstest.New(t)
			web1 := s.Peers(svc, "web", tc.peers, 80)[1]
			s.SetA(web1, "192.0.2.2")
			s.SetShuffle(tc.shuffled)
			h := run(t, Config{Name: svc, Servers: []string{s.Addr()}, Timeout: 10 * time.Second})
			var got []string // web-1's IPs as last sent
			poll := func() {
				if sent, _ := h.step(); sent != nil {
					got = sent[slices.IndexFunc(sent, func(p peer.Peer) bool { return p.FQDN == web1 })].IPs
				}
			}
			for range 40 {
				poll()
			}
			for i, ip := range []string{"192.0.2.5", "192.0.2.2"} {
				s.SetA(web1, ip)
				for range 40 {
					if poll(); slices.Equal(got, []string{ip}) {
						break
					}
				}
				if !slices.Equal(got, []string{ip}) {
					t.Fatalf("change %d to %s: web-1 last sent with %v", i+1, ip, got)
				}
			}
		})
	}
}
