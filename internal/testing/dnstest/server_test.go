package dnstest

import (
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func exchange(t *testing.T, s *Server, network, name string, qtype uint16, edns uint16) (*dns.Msg, error) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	c := &dns.Client{Net: network, Timeout: 500 * time.Millisecond}
	resp, _, err := c.Exchange(m, s.Addr())
	return resp, err
}

func TestServer(t *testing.T) {
	s := New(t)
	s.Peers("big.ns.svc.cluster.local", "big", 500, 80)
	s.Peers("small.ns.svc.cluster.local", "small", 3, 80)
	s.SetA("only-a.example", "192.0.2.1")
	s.SetBehaviour("fail.example", Behaviour{Rcode: dns.RcodeServerFailure})
	s.SetBehaviour("refused.example", Behaviour{Rcode: dns.RcodeRefused})
	s.SetSRV("junk.example", SRVRecord{Target: "a-0.junk.example", Port: 1})
	s.SetBehaviour("junk.example", Behaviour{Junk: true})

	tests := []struct {
		name, network, qname string
		edns                 uint16
		rcode, answers       int
		truncated            bool
	}{
		{"small over udp", "udp", "small.ns.svc.cluster.local", 0, dns.RcodeSuccess, 3, false},
		{"case and trailing dot", "udp", "SMALL.ns.svc.cluster.local.", 0, dns.RcodeSuccess, 3, false},
		{"big over udp without edns", "udp", "big.ns.svc.cluster.local", 0, dns.RcodeSuccess, -1, true},
		{"big over udp with edns", "udp", "big.ns.svc.cluster.local", 4096, dns.RcodeSuccess, -1, true},
		{"big over tcp", "tcp", "big.ns.svc.cluster.local", 4096, dns.RcodeSuccess, 500, false},
		{"unknown name", "udp", "nope.example", 0, dns.RcodeNameError, 0, false},
		{"nodata", "udp", "only-a.example", 0, dns.RcodeSuccess, 0, false},
		{"servfail", "udp", "fail.example", 0, dns.RcodeServerFailure, 0, false},
		{"refused", "tcp", "refused.example", 0, dns.RcodeRefused, 0, false},
		{"junk", "udp", "junk.example", 0, dns.RcodeSuccess, 1 + 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := exchange(t, s, tt.network, tt.qname, dns.TypeSRV, tt.edns)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Rcode != tt.rcode || resp.Truncated != tt.truncated {
				t.Fatalf("rcode %s truncated %v, want %s %v", dns.RcodeToString[resp.Rcode], resp.Truncated,
					dns.RcodeToString[tt.rcode], tt.truncated)
			}
			if tt.answers >= 0 && len(resp.Answer) != tt.answers {
				t.Fatalf("%d answers, want %d", len(resp.Answer), tt.answers)
			}
		})
	}

	resp, err := exchange(t, s, "udp", "big.ns.svc.cluster.local", dns.TypeSRV, 4096)
	if err != nil {
		t.Fatal(err)
	}
	resp.Compress = true
	if n := resp.Len(); n > 4096 || n < 1024 {
		t.Errorf("truncated edns answer has %d bytes, want (1024, 4096]", n)
	}
	resp, err = exchange(t, s, "tcp", "small.ns.svc.cluster.local", dns.TypeSRV, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Extra) != 3 {
		t.Errorf("got %d glue records, want 3", len(resp.Extra))
	}
	if got := s.Queries("tcp"); got != 3 {
		t.Errorf("tcp queries = %d, want 3", got)
	}
	if got := s.Queries("udp"); got != 9 {
		t.Errorf("udp queries = %d, want 9", got)
	}
}

func TestTruncateTCP(t *testing.T) {
	s := New(t)
	s.Peers("big.example", "big", 100, 80)
	s.SetTruncateTCP(true)
	resp, err := exchange(t, s, "tcp", "big.example", dns.TypeSRV, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Truncated || len(resp.Answer) >= 100 {
		t.Fatalf("truncated %v with %d answers, want a truncated answer", resp.Truncated, len(resp.Answer))
	}
}

func TestDropAndDelay(t *testing.T) {
	s := New(t)
	s.SetSRV("drop.example", SRVRecord{Target: "a.example", Port: 1})
	s.SetBehaviour("drop.example", Behaviour{Drop: true})
	if _, err := exchange(t, s, "udp", "drop.example", dns.TypeSRV, 0); err == nil {
		t.Error("dropped query got an answer")
	}
	s.SetBehaviour("drop.example", Behaviour{Delay: 100 * time.Millisecond})
	start := time.Now()
	if _, err := exchange(t, s, "udp", "drop.example", dns.TypeSRV, 0); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("delayed answer came after %v", d)
	}
	// A delay longer than the test must not hold Close up.
	s.SetBehaviour("drop.example", Behaviour{Delay: time.Hour})
	_, _ = exchange(t, s, "tcp", "drop.example", dns.TypeSRV, 0)
}

// TestShuffle: shuffled answers keep their records but change their order,
// and an answer too large for all its glue carries a different part of it.
func TestShuffle(t *testing.T) {
	s := New(t)
	s.Peers("big.ns.svc.cluster.local", "big", 1000, 80)
	s.SetShuffle(true)
	// answer returns the SRV targets in order and the owners of the glue.
	answer := func() (targets, glue []string) {
		t.Helper()
		resp, err := exchange(t, s, "tcp", "big.ns.svc.cluster.local", dns.TypeSRV, 4096)
		if err != nil {
			t.Fatal(err)
		}
		for _, rr := range resp.Answer {
			targets = append(targets, rr.(*dns.SRV).Target)
		}
		for _, rr := range resp.Extra {
			if a, ok := rr.(*dns.A); ok {
				glue = append(glue, a.Hdr.Name)
			}
		}
		if len(targets) != 1000 || len(glue) == 0 || len(glue) == 1000 {
			t.Fatalf("%d answers and %d glue records, want 1000 and part of the glue", len(targets), len(glue))
		}
		slices.Sort(glue)
		return targets, glue
	}
	t1, g1 := answer()
	t2, g2 := answer()
	if slices.Equal(t1, t2) {
		t.Error("two shuffled answers list their records in the same order")
	}
	slices.Sort(t1)
	slices.Sort(t2)
	if !slices.Equal(t1, t2) {
		t.Error("two shuffled answers hold different records")
	}
	if slices.Equal(g1, g2) {
		t.Error("two shuffled answers carry the same glue")
	}
}
